"""Evaluate compiled rules over one trace: masks -> groups/windows/sequences -> findings.

    findings, errors = evaluate_rules(compiled_rules, TraceContext(events))

Each rule runs on its own: an exception or an exhausted time budget is reported in
`errors` as {rule_id, error} and the other rules go on. The jobs live in their modules:
rules.engine.masks (which rows match), rules.engine.attrs (reading fields), rules.engine.windows (groups and
windows), rules.engine.sequence (sequences); this module runs them and builds the findings.
"""
from __future__ import annotations

from msgspec import UNSET

from ingest.engine import interruptions
from rules.engine import limits
from rules.engine.attrs import RowRef
from rules.engine.attrs import plain as _plain
from rules.engine.budget import Budget, RuleTimeout
from rules.engine.compiler import CompiledRule
from rules.engine.errors import EvalError
from rules.engine.features import TraceContext
from rules.engine.features.jobs import job_folders, rows_by_job
from rules.engine.masks import ALL, TraceMasks, by_time
from rules.engine.matches import Matches
from rules.engine.modifiers import json_text as _text
from rules.engine.quantities import human_duration
from rules.engine.results import Evidence, RuleFinding
from rules.engine.sequence import SequenceMatcher
from rules.engine.windows import Aggregation

__all__ = ["evaluate_rules", "evaluate_rule", "precompute_features", "selection_counts", "make_finding",
           "Budget", "RuleTimeout", "EvalError", "RowRef"]


def evaluate_rules(compiled_rules, ctx: TraceContext, time_budget_s: float = limits.RULE_TIME_BUDGET_S,
                   on_rule=None) -> tuple[list[RuleFinding], list[dict]]:
    """`on_rule(done, total)` is called before each rule (progress). Masks of tests that
    several rules share are computed once (one TraceMasks for the whole pack)."""
    findings, errors = [], []
    compiled_rules = list(compiled_rules)
    masks = TraceMasks(ctx)
    jobs = job_folders(ctx.events)
    for i, cr in enumerate(compiled_rules):
        if on_rule is not None:
            on_rule(i, len(compiled_rules))
        try:
            findings.extend(evaluate_rule(cr, ctx, Budget(time_budget_s), masks, jobs))
        except RuleTimeout as e:
            errors.append({"rule_id": cr.id, "error": str(e)})
        except Exception as e:  # one failing rule never stops the others
            interruptions.reraise(e)
            errors.append({"rule_id": cr.id, "error": f"{type(e).__name__}: {e}"})
    return findings, errors


def precompute_features(compiled_rules, ctx: TraceContext) -> None:
    """Compute, once each, the features the rules read (a progress stage of its own; a
    feature that fails is remembered and reported by each rule that reads it)."""
    for cr in compiled_rules:
        for sel in cr.selections.values():
            if sel.source is not None:
                try:
                    ctx.feature(sel.source)
                except Exception as e:  # remembered by the context; each rule reading it reports it
                    interruptions.reraise(e)


def evaluate_rule(cr: CompiledRule, ctx: TraceContext, budget: Budget | None = None,
                  masks: TraceMasks | None = None, jobs: list[str] | None = None) -> list[RuleFinding]:
    """`jobs`: the folders that are jobs of their own when the upload holds several
    (rules.engine.features.jobs): one job's rows never make a finding with another's."""
    budget = budget or Budget(limits.RULE_TIME_BUDGET_S)
    masks = masks or TraceMasks(ctx)
    if cr.sequence:
        return _findings(cr, SequenceMatcher(cr, masks, budget).matches(), budget)
    table_masks = masks.of(cr.source)
    budget.check("reading the table")
    assert cr.condition is not None  # the compiler gives every rule without a sequence its condition
    rows = table_masks.condition(cr.condition, cr.selections, ALL, budget)
    rows = by_time(table_masks.table, table_masks.every(rows))
    if not len(rows):
        return []
    if not jobs:
        return _findings(cr, Aggregation(cr, ctx.span, table_masks.table, table_masks.attrs, rows, budget).matches(),
                         budget)
    findings = []
    for part in rows_by_job(table_masks.table["artifact"], rows, jobs):
        aggregation = Aggregation(cr, ctx.span, table_masks.table, table_masks.attrs, part, budget)
        findings += _findings(cr, aggregation.matches(), budget)
    return findings


def selection_counts(cr: CompiledRule, ctx: TraceContext) -> dict[str, int]:
    """Rows each selection matches on its own: tells a rule author why a rule stayed quiet."""
    masks, budget = TraceMasks(ctx), Budget(limits.RULE_TIME_BUDGET_S)
    return {name: int(len(masks.of(sel.source).selection(sel, ALL, budget)))
            for name, sel in cr.selections.items()}


def _findings(cr: CompiledRule, matches: Matches, budget: Budget) -> list[RuleFinding]:
    findings: list[RuleFinding] = []
    for i, m in enumerate(matches.items):
        findings.append(make_finding(cr, m.refs, m.start_ts, m.end_ts, m.metrics, m.group, m.named_rows))
        if i % 64 == 63:
            budget.check("building findings")
    if matches.total > len(findings):
        findings[-1] = findings[-1].with_metrics(truncated=matches.total - len(findings))
    return findings


# ---------------------------------------------------------------- findings

def make_finding(cr: CompiledRule, refs: list[RowRef], start_ts: int, end_ts: int, metrics: dict,
                 group: dict, named_rows: dict[str, RowRef] | None = None) -> RuleFinding:
    """One finding from its evidence rows (time-ordered), metrics and group keys."""
    rule = cr.rule
    first, last = refs[0], refs[-1]
    rows_by_root = {"first": first, "last": last, **(named_rows or {})}
    scalars = {"count": metrics.get("count"), "rate": metrics.get("rate"),
               "duration": human_duration(end_ts - start_ts), "start": start_ts, "end": end_ts}

    def lookup(path: tuple[str, ...]):
        name = ".".join(path)
        if name in group:
            return group[name]
        if path[0] == "metrics":
            key = ".".join(path[1:])
            return metrics.get(key, group.get(key))
        if path[0] in rows_by_root and len(path) > 1:
            return rows_by_root[path[0]].get(".".join(path[1:]))
        return scalars.get(name)

    if len(refs) > limits.MAX_EVIDENCE:
        refs = refs[:limits.MAX_EVIDENCE - 1] + [refs[-1]]
    fingerprint = {f: group[f] if f in group else first.get(f) for f in cr.fingerprint}
    plan = rule.capture_plan
    return RuleFinding(
        rule_id=rule.id, rule_version=rule.version, title=rule.title, severity=rule.severity,
        root_cause=rule.root_cause or "", slo=rule.slo, start_ts=int(start_ts), end_ts=int(end_ts),
        explanation=cr.explain.render(lookup),
        recommendations=tuple(t.render(lookup) for t in cr.recommend),
        references=tuple(rule.references), evidence=tuple(_evidence(r) for r in refs),
        metrics={**{k: _plain(v) for k, v in metrics.items()}, **group},
        group=dict(group), fingerprint={k: _plain(v) for k, v in fingerprint.items()},
        causes=tuple(rule.causes), suppresses=tuple(rule.suppresses), tags=tuple(rule.tags),
        capture=plan if plan is not None else UNSET,  # what RuleFinding makes of None
    )


def _evidence(ref: RowRef) -> Evidence:
    text = ref.get("attrs.text") or ref.get("attrs.message") or ref.get("name") or ""
    text = _text(text)
    if len(text) > 500:
        text = text[:499] + "…"
    return Evidence(artifact=str(ref.get("artifact") or ""), loc=str(ref.get("loc") or ""),
                    ts=int(ref.get("ts") or 0), text=text)
