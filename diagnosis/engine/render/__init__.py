"""Renderings of a report: text for people, JSON for machines; JUnit, SARIF and a Markdown
summary for CI (their own modules). Each takes the report and `RenderOptions`."""
from __future__ import annotations

import datetime as dt
import json

from diagnosis.engine.render.junit import to_junit
from diagnosis.engine.render.markdown import to_markdown
from diagnosis.engine.render.options import RenderOptions
from diagnosis.engine.render.sarif import to_sarif
from diagnosis.engine.results import Report
from rules.engine.capture_plans import CapturePlan

__all__ = ["FORMATS", "RENDERERS", "RenderOptions", "fmt_ts", "to_json", "to_junit", "to_markdown", "to_sarif",
           "to_text"]


def fmt_ts(ns: int | None) -> str:
    if not ns:
        return "-"
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def to_json(report: Report, options: RenderOptions = RenderOptions()) -> str:
    doc = report.to_dict()
    if options.web_url:  # a server's report: where people read it
        doc["web_url"] = options.web_url
    return json.dumps(doc, indent=2, default=str)


def to_text(report: Report, options: RenderOptions = RenderOptions()) -> str:
    trace = report.trace
    lines = [f"report: {options.web_url}"] if options.web_url else []
    lines.append(f"trace: {len(trace.artifacts)} artifact(s), {trace.events:,} events, "
                 f"{fmt_ts(trace.start_ts)} .. {fmt_ts(trace.end_ts)}")
    for a in trace.artifacts:
        lines.append(f"  {a.path}: {a.format}, {a.events:,} events")
        for w in a.warnings[:5]:
            lines.append(f"    ! {w}")
    findings = {f.id: f for f in report.findings}
    if not report.clusters:
        lines.append("\nno findings")
    for c in report.clusters:
        lines.append(f"\n[{c.severity.upper()}] {c.id} {c.title}  ({c.root_cause})")
        if len(c.findings) > 1:
            lines.append(f"  grouped: {c.why_grouped}")
        for fid in c.findings:
            f = findings[fid]
            tag = f" (consequence of {f.consequence_of})" if f.consequence_of else ""
            lines.append(f"  {fid} {f.severity}: {f.title} [{f.rule_id} v{f.rule_version}]{tag}")
            for part in f.explanation.splitlines():
                lines.append(f"    {part}")
            for ev in f.evidence[:3]:
                text = ev.text.strip().splitlines()
                head = text[-1] if text else ""
                lines.append(f"    evidence {ev.artifact}:{ev.loc}  {head[:160]}")
            for r in f.recommendations:
                lines.append(f"    -> {r}")
            if isinstance(f.capture, CapturePlan):
                lines.append(f"    what would decide it: {f.capture.summary}"
                             + (f" ({f.capture.why})" if f.capture.why else ""))
    for v in report.violations:
        if v.error is None:
            lines.append(f"\nSLO {v.slo} violated: {v.sli} = {v.observed_text} "
                         f"(objective {v.objective}, burn rate {v.burn_rate:.1f}x)")
        else:
            lines.append(f"\nSLO {v.slo} could not be evaluated: {v.error}")
    for e in report.rule_errors:
        lines.append(f"\nrule {e.rule_id} failed: {e.error}")
    return "\n".join(lines) + "\n"


RENDERERS = {"json": to_json, "text": to_text, "junit": to_junit, "sarif": to_sarif, "markdown": to_markdown}
FORMATS = tuple(RENDERERS)
