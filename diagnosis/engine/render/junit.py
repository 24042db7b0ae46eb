"""JUnit XML of a report for CI test views: one suite per root-cause cluster (properties: root
cause, severity, fingerprint, the trace's web page), one case per finding in it, failed when at
or above --fail-on. A report without findings is an empty `testsuites`, not a made-up case."""
from __future__ import annotations

from xml.etree import ElementTree as ET

from diagnosis.engine.render.options import RenderOptions
from diagnosis.engine.results import Cluster, Report
from rules.engine.results import Finding
from rules.engine.severity import at_least


def to_junit(report: Report, options: RenderOptions = RenderOptions()) -> str:
    root = ET.Element("testsuites", name="tracedoc")
    by_id = {f.id: f for f in report.findings}
    clustered = {fid for c in report.clusters for fid in c.findings}
    for c in report.clusters:
        _suite(root, f"{c.id} {c.title}", [by_id[i] for i in c.findings if i in by_id], options, cluster=c)
    loose = [f for f in report.findings if f.id not in clustered]
    if loose:
        _suite(root, "findings outside clusters", loose, options)
    for key in ("tests", "failures"):
        root.set(key, str(sum(int(s.attrib[key]) for s in root)))
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def _suite(root: ET.Element, name: str, findings: list[Finding], options: RenderOptions,
           cluster: Cluster | None = None) -> None:
    suite = ET.SubElement(root, "testsuite", name=name, tests=str(len(findings)), errors="0", skipped="0")
    props = ET.SubElement(suite, "properties")
    values = {"root_cause": cluster.root_cause, "severity": cluster.severity, "fingerprint": cluster.fingerprint,
              "why_grouped": cluster.why_grouped} if cluster else {}
    if options.web_url:
        values["url"] = options.web_url
    for key, value in values.items():
        ET.SubElement(props, "property", name=key, value=str(value))
    failures = 0
    for f in findings:
        case = ET.SubElement(suite, "testcase", classname=f.root_cause or f.rule_id, name=f"{f.id} {f.rule_id}")
        body = "\n".join([f.explanation, *(f"-> {r}" for r in f.recommendations),
                          *(f"evidence {e.artifact}:{e.loc}" for e in f.evidence[:3]),
                          *([f"report: {options.web_url}"] if options.web_url else [])])
        if at_least(f.severity, options.fail_on):
            failures += 1
            ET.SubElement(case, "failure", message=f"[{f.severity}] {f.title}", type=f.severity).text = body
        else:
            ET.SubElement(case, "system-out").text = f"[{f.severity}] {f.title}\n{body}"
    suite.set("failures", str(failures))
