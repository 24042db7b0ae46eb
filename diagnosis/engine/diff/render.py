"""Renderings of a `ReportDiff`: text for a CI log, JSON for machines, Markdown for a PR comment."""
from __future__ import annotations

import json
from typing import Callable

from diagnosis.engine.diff import ClusterChange, FindingChange, KernelDelta, ReportDiff, SliDelta

MARK = {"appeared": "+", "disappeared": "-", "persisted": "="}
KERNEL_NAME_CHARS = 70  # templated C++ kernel names run to hundreds of characters


def to_json(diff: ReportDiff) -> str:
    return json.dumps(diff.to_dict(), indent=2)


def _headline(diff: ReportDiff) -> str:
    t = diff.thresholds
    gate = f"--fail-on {t.fail_on}" + (f", --fail-on-regression {t.fail_on_regression_pct:g}%"
                                       if t.fail_on_regression_pct is not None else ", SLIs not gated")
    if diff.verdict.regression:
        return f"REGRESSION ({len(diff.verdict.reasons)} reason(s); {gate})"
    return f"no regression ({gate})"


def _counts(changes) -> str:
    return ", ".join(f"{sum(c.status == s for c in changes)} {s}" for s in MARK)


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"{value:g}{unit}" if unit in ("x", "%") else f"{value:g} {unit}"


def _change(s: SliDelta | KernelDelta) -> str:
    if s.change_pct is None:
        return ""
    text = f"{s.change_pct:+.1f}%"
    if isinstance(s, SliDelta) and s.regressed:
        text += " REGRESSED"
    return text


def _finding_line(f: FindingChange) -> str:
    moved = f" (was {f.base_severity})" if f.status == "persisted" and f.base_severity != f.severity else ""
    ids = " -> ".join(i for i in (f.base_id, f.new_id) if i)
    return f"{MARK[f.status]} [{f.severity.upper()}]{moved} {f.rule_id}: {f.title} ({ids})"


def _cluster_line(c: ClusterChange) -> str:
    ids = " -> ".join(i for i in (c.base_id, c.new_id) if i)
    return f"{MARK[c.status]} [{c.severity.upper()}] {c.root_cause or '-'}: {c.title} ({ids}, {c.findings} finding(s))"


def _short(name: str) -> str:
    return name if len(name) <= KERNEL_NAME_CHARS else name[:KERNEL_NAME_CHARS - 3] + "..."


def _kernel_cells(k: KernelDelta) -> tuple[str, str]:
    def one(ms, calls):
        return "-" if ms is None else f"{ms:g} ms / {calls} calls"
    return one(k.base_ms, k.base_calls), one(k.new_ms, k.new_calls)


def to_text(diff: ReportDiff) -> str:
    lines = [f"tracedoc diff: {_headline(diff)}"]
    lines += [f"  ! {r}" for r in diff.verdict.reasons]
    lines.append(f"\nclusters: {_counts(diff.clusters)}")
    lines += [f"  {_cluster_line(c)}" for c in diff.clusters]
    lines.append(f"findings: {_counts(diff.findings)}")
    lines += [f"  {_finding_line(f)}" for f in diff.findings]
    if diff.violations:
        lines.append(f"SLO violations: {_counts(diff.violations)}")
        lines += [f"  {MARK[v.status]} {v.slo}: {v.sli} {v.base_observed or 'met'} -> {v.new_observed or 'met'}"
                  for v in diff.violations]
    lines.append("\nSLIs (base -> new):")
    width = max(len(s.label) for s in diff.slis)
    for s in diff.slis:
        row = f"  {s.label:<{width}}  {_number(s.base, s.unit):>12} -> {_number(s.new, s.unit):<12} {_change(s)}"
        lines.append(row.rstrip() + (f"  [{s.note}]" if s.note else ""))
    if diff.kernels:
        lines.append("\ntop kernels by GPU time (base -> new):")
        for k in diff.kernels:
            base, new = _kernel_cells(k)
            lines.append(f"  {_short(k.name):<{KERNEL_NAME_CHARS}}  {base:>24} -> {new:<24} {_change(k)}".rstrip())
    else:
        lines.append("\ntop kernels: n/a (no kernel events on either side)")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(diff: ReportDiff) -> str:
    icon = ":x:" if diff.verdict.regression else ":white_check_mark:"
    lines = [f"### {icon} tracedoc diff: {_headline(diff)}", ""]
    lines += [f"- {_cell(r)}" for r in diff.verdict.reasons]
    if diff.verdict.reasons:
        lines.append("")
    lines += ["| SLI | base | new | change | note |", "|---|---:|---:|---:|---|"]
    lines += [f"| {s.label} | {_number(s.base, s.unit)} | {_number(s.new, s.unit)} | {_change(s) or '-'} | "
              f"{_cell(s.note)} |" for s in diff.slis]
    lines += ["", f"**Clusters**: {_counts(diff.clusters)}", ""]
    if diff.clusters:
        lines += ["| | severity | root cause | title | findings |", "|---|---|---|---|---:|"]
        lines += [f"| {c.status} | {c.severity} | `{c.root_cause or '-'}` | {_cell(c.title)} | {c.findings} |"
                  for c in diff.clusters]
        lines.append("")
    lines += [f"**Findings**: {_counts(diff.findings)}", ""]
    if diff.findings:
        lines += ["| | severity | rule | title |", "|---|---|---|---|"]
        lines += [f"| {f.status} | {f.severity}" + (f" (was {f.base_severity})" if f.status == "persisted"
                                                     and f.base_severity != f.severity else "")
                  + f" | `{f.rule_id}` | {_cell(f.title)} |" for f in diff.findings]
        lines.append("")
    if diff.violations:
        lines += ["| SLO violation | | base | new |", "|---|---|---|---|"]
        lines += [f"| `{v.slo}` | {v.status} | {v.base_observed or 'met'} | {v.new_observed or 'met'} |"
                  for v in diff.violations]
        lines.append("")
    if diff.kernels:
        lines += ["<details><summary>Top kernels by GPU time</summary>", "",
                  "| kernel | base | new | change |", "|---|---:|---:|---:|"]
        for k in diff.kernels:
            base, new = _kernel_cells(k)
            lines.append(f"| `{_cell(_short(k.name))}` | {base} | {new} | {_change(k) or '-'} |")
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


RENDERERS: dict[str, Callable[[ReportDiff], str]] = {"text": to_text, "json": to_json, "markdown": to_markdown}
