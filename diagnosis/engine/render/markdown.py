"""A Markdown summary of a report for a pull-request comment or a CI job summary: the verdict,
a table of root-cause clusters, SLO violations, and the link to the full report."""
from __future__ import annotations

from diagnosis.engine.render.options import RenderOptions
from diagnosis.engine.results import Report
from rules.engine.severity import MOST_SEVERE_FIRST, at_least

ICON = {"critical": "🔴", "error": "🟠", "warning": "🟡", "info": "🔵"}
MAX_ROWS = 20


def to_markdown(report: Report, options: RenderOptions = RenderOptions()) -> str:
    failing = [f for f in report.findings if at_least(f.severity, options.fail_on)]
    counts = report.summary.findings_by_severity
    tally = ", ".join(f"{counts[s]} {s}" for s in MOST_SEVERE_FIRST if counts.get(s))
    verdict = (f"**{len(failing)} finding(s) at or above `{options.fail_on}`**" if failing
               else f"no finding at or above `{options.fail_on}`")
    lines = [f"### tracedoc: {verdict}", ""]
    lines.append(f"{len(report.trace.artifacts)} file(s), {report.trace.events:,} events; "
                 f"findings: {tally or 'none'}." + (f" [Full report]({options.web_url})" if options.web_url else ""))
    if report.clusters:
        lines += ["", "| severity | root cause | what | findings |", "|---|---|---|---|"]
        for c in report.clusters[:MAX_ROWS]:
            lines.append(f"| {ICON.get(c.severity, '')} {c.severity} | `{_cell(c.root_cause or '-')}` | "
                         f"{_cell(c.title)} | {len(c.findings)} |")
        if len(report.clusters) > MAX_ROWS:
            lines.append(f"\n… and {len(report.clusters) - MAX_ROWS} more cluster(s)")
    violations = [v for v in report.violations if v.error is None]
    if violations:
        lines += ["", "SLOs violated:"]
        lines += [f"- `{v.slo}`: {v.sli} = {v.observed_text} (objective {v.objective}, burn rate "
                  f"{v.burn_rate:.1f}x)" for v in violations]
    headline = {c.headline for c in report.clusters}
    todo = [f for f in report.findings if f.id in headline and f.recommendations and at_least(f.severity, "warning")]
    if todo:
        lines += ["", "<details><summary>What to do</summary>", ""]
        for f in todo[:MAX_ROWS]:
            lines.append(f"- **{_cell(f.title)}**: {_cell(f.recommendations[0])}")
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text safe in a table cell: no pipes or line breaks."""
    return " ".join(text.replace("|", "\\|").split())
