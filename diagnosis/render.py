"""Renderings of a report: text for people, JSON for machines, JUnit and SARIF for CI."""
from __future__ import annotations

import datetime as dt
import json
from xml.etree import ElementTree as ET

from diagnosis.severity import at_least

SARIF_LEVEL = {"info": "note", "warning": "warning", "error": "error", "critical": "error"}


def fmt_ts(ns: int | None) -> str:
    if not ns:
        return "-"
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def to_json(report: dict) -> str:
    return json.dumps(report, indent=2, default=str)


def to_text(report: dict) -> str:
    lines = []
    arts = report["trace"]["artifacts"]
    lines.append(f"trace: {len(arts)} artifact(s), {report['trace']['events']:,} events, "
                 f"{fmt_ts(report['trace']['start_ts'])} .. {fmt_ts(report['trace']['end_ts'])}")
    for a in arts:
        lines.append(f"  {a['path']}: {a['format']}, {a['events']:,} events")
        for w in a["warnings"][:5]:
            lines.append(f"    ! {w}")
    findings = {f["id"]: f for f in report["findings"]}
    if not report["clusters"]:
        lines.append("\nno findings")
    for c in report["clusters"]:
        lines.append(f"\n[{c['severity'].upper()}] {c['id']} {c['title']}  ({c['root_cause']})")
        if len(c["findings"]) > 1:
            lines.append(f"  grouped: {c['why_grouped']}")
        for fid in c["findings"]:
            f = findings[fid]
            tag = f" (consequence of {f['consequence_of']})" if f.get("consequence_of") else ""
            lines.append(f"  {fid} {f['severity']}: {f['title']} [{f['rule_id']} v{f['rule_version']}]{tag}")
            for part in f["explanation"].splitlines():
                lines.append(f"    {part}")
            for ev in f["evidence"][:3]:
                text = ev["text"].strip().splitlines()
                head = text[-1] if text else ""
                lines.append(f"    evidence {ev['artifact']}:{ev['loc']}  {head[:160]}")
            for r in f["recommendations"]:
                lines.append(f"    -> {r}")
    for v in report["violations"]:
        lines.append(f"\nSLO {v['slo']} violated: {v['sli']} = {v['observed_text']} "
                     f"(objective {v['objective']}, burn rate {v['burn_rate']:.1f}x)")
    for e in report.get("rule_errors", []):
        lines.append(f"\nrule {e['rule_id']} failed: {e['error']}")
    return "\n".join(lines) + "\n"


def to_junit(report: dict, fail_on: str = "error") -> str:
    """One test case per rule finding; failures at or above fail_on."""
    suite = ET.Element("testsuite", name="tracedoc", tests=str(len(report["findings"]) or 1))
    failures = 0
    for f in report["findings"]:
        case = ET.SubElement(suite, "testcase", classname=f["root_cause"] or f["rule_id"], name=f["rule_id"])
        if at_least(f["severity"], fail_on):
            failures += 1
            fail = ET.SubElement(case, "failure", message=f["title"], type=f["severity"])
            fail.text = f["explanation"] + "\n" + "\n".join(f["recommendations"])
        else:
            ET.SubElement(case, "system-out").text = f["explanation"]
    if not report["findings"]:
        ET.SubElement(suite, "testcase", classname="tracedoc", name="no-findings")
    suite.set("failures", str(failures))
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


def to_sarif(report: dict) -> str:
    rules, results = {}, []
    for f in report["findings"]:
        rules.setdefault(f["rule_id"], {
            "id": f["rule_id"], "name": f["title"],
            "shortDescription": {"text": f["title"]},
            "properties": {"root_cause": f["root_cause"], "version": f["rule_version"]},
        })
        locations = [{"physicalLocation": {"artifactLocation": {"uri": ev["artifact"]},
                                           **_sarif_region(ev["loc"])}} for ev in f["evidence"][:5]]
        results.append({"ruleId": f["rule_id"], "level": SARIF_LEVEL.get(f["severity"], "note"),
                        "message": {"text": f["explanation"]}, "locations": locations,
                        "properties": {"severity": f["severity"], "cluster": f["cluster"]}})
    doc = {"version": "2.1.0",
           "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
           "runs": [{"tool": {"driver": {"name": "tracedoc", "rules": list(rules.values())}},
                     "results": results}]}
    return json.dumps(doc, indent=2)


def _sarif_region(loc: str) -> dict:
    """'line 12' / 'line 3-9' -> a SARIF region; other locations are not lines."""
    if loc.startswith("line "):
        nums = loc[5:].split("-")
        try:
            start = int(nums[0])
            end = int(nums[-1])
        except ValueError:
            return {}
        return {"region": {"startLine": start, "endLine": end}}
    return {}


RENDERERS = {"json": to_json, "text": to_text, "junit": to_junit, "sarif": to_sarif}
