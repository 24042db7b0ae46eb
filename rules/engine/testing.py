"""Rule tests: each rule's `tests.fires` scenarios must make it fire, `tests.quiet` ones must not.

    results = run_rule_tests(rules, corpus_root, diagnose_scenario)

`diagnose_scenario(path) -> events DataFrame` is injected (the CLI passes the real
ingest pipeline; tests pass a function that builds a small frame), and is called once per
scenario however many rules name it. Like Sigma, a rule with status `test` or `stable`
must name at least one firing and one quiet scenario.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from rules.engine.compiler import compile_rule
from rules.engine.evaluator import evaluate_rules, selection_counts
from rules.engine.features import TraceContext
from rules.engine.severity import RANK

GATED_STATUSES = ("test", "stable")


@dataclass
class TestResult:
    __test__ = False  # not a pytest class
    rule_id: str
    scenario: str
    expect: str          # fires | quiet | status
    passed: bool
    reason: str

    def line(self) -> str:
        where = f" {self.expect} {self.scenario}" if self.scenario else f" {self.expect}"
        return f"{'PASS' if self.passed else 'FAIL'} {self.rule_id}{where}: {self.reason}"


# `fixtures/<path>` names the project's own captures (tests/fixtures), e.g. the multi-GPU
# incidents the shared corpus does not have; every other scenario is relative to the corpus.
FIXTURE_PREFIX = "fixtures/"
PROJECT_FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"


def run_rule_tests(rules, corpus_root, diagnose_scenario: Callable[[Path], pd.DataFrame]) -> list[TestResult]:
    root = Path(corpus_root).resolve()
    contexts: dict[str, TraceContext | str] = {}

    def context(scenario: str) -> TraceContext | str:
        if scenario not in contexts:
            base, rel = ((PROJECT_FIXTURES, scenario[len(FIXTURE_PREFIX):]) if scenario.startswith(FIXTURE_PREFIX)
                         else (root, scenario))
            path = (base / rel).resolve()
            if not path.is_relative_to(base):
                contexts[scenario] = "scenario path leaves its root"
            elif not path.exists():
                contexts[scenario] = f"scenario not found under {base}"
            else:
                try:
                    contexts[scenario] = TraceContext(diagnose_scenario(path))
                except Exception as e:  # a broken scenario fails its tests, not the run
                    contexts[scenario] = f"could not load the scenario: {type(e).__name__}: {e}"
        return contexts[scenario]

    results = []
    for rule in rules:
        tests = rule.tests or {}
        if rule.status in GATED_STATUSES and not (tests.get("fires") and tests.get("quiet")):
            results.append(TestResult(rule.id, "", "status", False,
                                      f"status {rule.status} needs at least one `fires` and one `quiet` scenario "
                                      "(or status experimental)"))
        compiled = compile_rule(rule)
        floor = RANK[tests.get("min_severity", "info")]
        for expect in ("fires", "quiet"):
            for scenario in tests.get(expect) or []:
                ctx = context(scenario)
                if isinstance(ctx, str):
                    results.append(TestResult(rule.id, scenario, expect, False, ctx))
                    continue
                findings, errors = evaluate_rules([compiled], ctx)
                if errors:
                    results.append(TestResult(rule.id, scenario, expect, False, f"rule failed: {errors[0]['error']}"))
                    continue
                hits = [f for f in findings if RANK[f.severity] >= floor]
                results.append(_judge(rule.id, scenario, expect, hits, compiled, ctx))
    return results


def _judge(rule_id, scenario, expect, hits, compiled, ctx) -> TestResult:
    if expect == "fires":
        if hits:
            return TestResult(rule_id, scenario, expect, True, f"{len(hits)} finding(s): {_short(hits[0].explanation)}")
        counts = ", ".join(f"{k}={v:,}" for k, v in selection_counts(compiled, ctx).items())
        return TestResult(rule_id, scenario, expect, False,
                          f"no finding; rows matched per selection: {counts} (of {len(ctx.events):,} events)")
    if hits:
        return TestResult(rule_id, scenario, expect, False,
                          f"fired {len(hits)} finding(s), expected none: {_short(hits[0].explanation)}")
    return TestResult(rule_id, scenario, expect, True, "no finding")


def _short(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 1] + "…"
