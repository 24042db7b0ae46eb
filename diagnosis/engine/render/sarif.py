"""SARIF 2.1.0 (OASIS) of a report, for code-scanning views: one rule per rule id with its help
(what it found, what to do, references) and a severity mapping, one result per finding with
regions (lines of a log; the event of a trace as a logical location) and a fingerprint that
stays the same across runs."""
from __future__ import annotations

import json
import re

from diagnosis.engine.render.options import SARIF_LEVEL, RenderOptions
from diagnosis.engine.results import Report
from rules.engine.results import Evidence, Finding

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
# GitHub code scanning sorts and filters on these (`problem.severity`, and a 0-100 rank)
PROBLEM_SEVERITY = {"info": "recommendation", "warning": "warning", "error": "error", "critical": "error"}
RANK = {"info": 10.0, "warning": 40.0, "error": 70.0, "critical": 95.0}
LINES = re.compile(r"line (\d+)(?:-(\d+))?$")
EVENT = re.compile(r"^([A-Za-z_]\w*)((?:\[\d+\])+)$")  # traceEvents[30], device_traces[0][358]
MAX_LOCATIONS = 5


def to_sarif(report: Report, options: RenderOptions = RenderOptions()) -> str:
    rules: dict[str, dict] = {}
    results = []
    for f in report.findings:
        rules.setdefault(f.rule_id, _rule(f))
        results.append(_result(f, list(rules).index(f.rule_id), report, options))
    run = {"tool": {"driver": {"name": "tracedoc", "rules": list(rules.values())}},
           "results": results,
           "columnKind": "unicodeCodePoints"}
    if options.web_url:
        run["properties"] = {"web_url": options.web_url}
    return json.dumps({"version": "2.1.0", "$schema": SARIF_SCHEMA, "runs": [run]}, indent=2)


def _rule(f: Finding) -> dict:
    todo = "\n".join(f"- {r}" for r in f.recommendations)
    refs = "\n".join(f"- {r}" for r in f.references)
    help_md = f"**{f.title}** (root cause `{f.cause_key}`)\n\n" + \
        (f"What to do:\n{todo}\n" if todo else "") + (f"\nReferences:\n{refs}\n" if refs else "")
    rule = {
        "id": f.rule_id, "name": _pascal(f.rule_id),
        "shortDescription": {"text": f.title},
        "fullDescription": {"text": f"{f.title}: root cause {f.cause_key}."},
        "help": {"text": "\n".join([f.title, *f.recommendations, *f.references]), "markdown": help_md},
        "defaultConfiguration": {"level": SARIF_LEVEL.get(f.severity, "note")},
        "properties": {"root_cause": f.root_cause, "version": f.rule_version, "tags": ["performance", "tracedoc"],
                       "problem.severity": PROBLEM_SEVERITY.get(f.severity, "recommendation")},
    }
    if f.references:
        rule["helpUri"] = f.references[0]
    return rule


def _result(f: Finding, rule_index: int, report: Report, options: RenderOptions) -> dict:
    cluster = next((c for c in report.clusters if c.id == f.cluster), None)
    result = {
        "ruleId": f.rule_id, "ruleIndex": rule_index, "level": SARIF_LEVEL.get(f.severity, "note"),
        "message": {"text": f.explanation or f.title},
        "locations": [_location(ev) for ev in f.evidence[:MAX_LOCATIONS]] or
                     [{"physicalLocation": {"artifactLocation": {"uri": a.path}}} for a in report.trace.artifacts[:1]],
        "rank": RANK.get(f.severity, 10.0),
        "properties": {"severity": f.severity, "finding": f.id, "cluster": f.cluster,
                       "root_cause": f.root_cause},
    }
    if cluster is not None:
        result["partialFingerprints"] = {"tracedocCluster/v1": cluster.fingerprint}
    if options.web_url:
        result["hostedViewerUri"] = options.web_url
    return result


def _location(ev: Evidence) -> dict:
    physical: dict = {"artifactLocation": {"uri": ev.artifact}}
    location: dict = {"physicalLocation": physical}
    if m := LINES.match(ev.loc):
        start = int(m[1])
        end = int(m[2] or start)
        region: dict = {"startLine": start, "endLine": end}
        text = ev.text.rstrip("\n")
        if start == end and text and "\n" not in text:  # one log line: it is the whole region
            region.update(startColumn=1, endColumn=len(text) + 1)
        if text:
            region["snippet"] = {"text": text}
        physical["region"] = region
    elif m := EVENT.match(ev.loc):
        # an event of a structured trace has no line: its index, as a logical location
        indices = [int(i) for i in re.findall(r"\d+", m[2])]
        location["logicalLocations"] = [{"name": ev.loc, "fullyQualifiedName": f"{ev.artifact}:{ev.loc}",
                                         "kind": "element"}]
        location["properties"] = {"event_array": m[1], "event_index": indices[-1]}
    if ev.text and "region" not in physical:
        location["message"] = {"text": ev.text.strip().splitlines()[-1][:500] if ev.text.strip() else ev.text}
    return location


def _pascal(rule_id: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", rule_id) if part)
