"""The CI formats of a real diagnosis: SARIF 2.1.0 valid against the OASIS schema (vendored in
tests/fixtures/sarif with its source) with rule metadata and regions; JUnit with one suite per
root-cause cluster and its properties; the Markdown summary; the web URL in every format; one
label syntax for `submit`."""
import json
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest

from cli.submit import SubmitError, parse_labels
from diagnosis.engine.render import FORMATS, RENDERERS, RenderOptions
from rules.engine.severity import at_least
from tests.corpus import corpus

SARIF_SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "sarif" / "sarif-schema-2.1.0.json"
URL = "https://tracedoc.example/traces/42/"


@pytest.fixture(scope="module")
def reports(corpus_dir):
    """A trace (Kineto, events by index), a log (lines) and a healthy run (no error)."""
    from diagnosis.engine.pipeline import run
    return {name: run([corpus(*parts)], show_progress=False) for name, parts in {
        "fragmented": ("h200", "fragmented_decode"), "cudagraph": ("h200", "cudagraph_abort"),
        "healthy": ("h200", "healthy_decode"),
        "oom_log": ("public", "logs", "cudagraph_capture_oom_sglang_5285.log")}.items()}


def test_sarif_is_valid_sarif_2_1_0_with_rule_help_and_regions(reports):
    validator = jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text()))
    for report in reports.values():
        validator.validate(json.loads(RENDERERS["sarif"](report, RenderOptions(web_url=URL))))
    sarif = json.loads(RENDERERS["sarif"](reports["fragmented"], RenderOptions(web_url=URL)))
    run = sarif["runs"][0]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    churn = next(f for f in reports["fragmented"].findings if f.rule_id == "allocator.churn")
    rule = rules["allocator.churn"]
    assert rule["help"]["text"] and churn.recommendations[0] in rule["help"]["markdown"]
    assert rule["defaultConfiguration"]["level"] in ("note", "warning", "error")
    assert rule["properties"]["problem.severity"] in ("recommendation", "warning", "error")
    for result in run["results"]:
        assert result["hostedViewerUri"] == URL
        assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["partialFingerprints"]["tracedocCluster/v1"]
    assert run["properties"]["web_url"] == URL


def _locations(report) -> list[dict]:
    return [loc for res in json.loads(RENDERERS["sarif"](report))["runs"][0]["results"] for loc in res["locations"]]


def test_sarif_regions_are_lines_for_logs_and_event_indexes_for_traces(reports):
    evidence = [e for f in reports["oom_log"].findings for e in f.evidence[:5] if e.loc.startswith("line ")]
    lines = [loc["physicalLocation"]["region"] for loc in _locations(reports["oom_log"])
             if "region" in loc["physicalLocation"]]
    assert evidence and len(lines) == len(evidence)
    for region, ev in zip(lines, evidence):
        assert f"line {region['startLine']}" == ev.loc.split("-")[0] or ev.loc == \
            f"line {region['startLine']}-{region['endLine']}"
        assert region["snippet"]["text"] == ev.text.rstrip("\n")
    single = [r for r in lines if r["startLine"] == r["endLine"] and "startColumn" in r]
    assert all(r["endColumn"] == len(r["snippet"]["text"]) + 1 for r in single)
    trace_events = [e for f in reports["fragmented"].findings for e in f.evidence[:5] if "[" in e.loc]
    logical = [loc for loc in _locations(reports["fragmented"]) if "logicalLocations" in loc]
    assert trace_events and len(logical) == len(trace_events)
    for loc, ev in zip(logical, trace_events):
        assert loc["logicalLocations"][0]["name"] == ev.loc
        assert f"[{loc['properties']['event_index']}]" in ev.loc


def test_junit_has_one_suite_per_cluster_with_its_properties(reports):
    report = reports["fragmented"]
    root = ET.fromstring(RENDERERS["junit"](report, RenderOptions(fail_on="warning", web_url=URL)))
    suites = root.findall("testsuite")
    assert len(suites) == len(report.clusters) and suites
    for suite, cluster in zip(suites, report.clusters):
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert props == {"root_cause": cluster.root_cause, "severity": cluster.severity,
                         "fingerprint": cluster.fingerprint, "why_grouped": cluster.why_grouped, "url": URL}
        assert len(suite.findall("testcase")) == len(cluster.findings) == int(suite.get("tests"))
    assert int(root.get("failures")) == sum(at_least(f.severity, "warning") for f in report.findings)
    assert not any(tc.get("name") == "no-findings" for tc in root.iter("testcase"))


def test_a_report_without_findings_is_an_empty_junit_run(reports):
    from diagnosis.engine.results import Report
    empty = Report(trace=reports["healthy"].trace)
    root = ET.fromstring(RENDERERS["junit"](empty))
    assert (root.get("tests"), root.get("failures"), list(root)) == ("0", "0", [])


def test_markdown_summary_lists_clusters_and_links_the_report(reports):
    report = reports["cudagraph"]
    md = RENDERERS["markdown"](report, RenderOptions(web_url=URL))
    assert md.startswith("### tracedoc: **") and f"[Full report]({URL})" in md
    for c in report.clusters:
        assert f"`{c.root_cause}`" in md
    healthy = RENDERERS["markdown"](reports["healthy"], RenderOptions())
    assert "no finding at or above `error`" in healthy


def test_every_format_carries_the_web_url(reports):
    for fmt in FORMATS:
        assert URL in RENDERERS[fmt](reports["cudagraph"], RenderOptions(web_url=URL)), fmt
    assert json.loads(RENDERERS["json"](reports["cudagraph"], RenderOptions(web_url=URL)))["web_url"] == URL


@pytest.mark.parametrize("values, labels", [
    (["branch=main"], {"branch": "main"}),
    (["branch=main,ci=true", "pr=12"], {"branch": "main", "ci": "true", "pr": "12"}),
    (['{"branch": "main", "attempt": 2}'], {"branch": "main", "attempt": "2"}),
    ([], None),
])
def test_labels_take_key_value_and_json(values, labels):
    assert parse_labels(values) == labels


@pytest.mark.parametrize("bad", ["branch", "=main", '{"branch": ', "[1, 2]"])
def test_bad_labels_say_why(bad):
    with pytest.raises(SubmitError, match="--labels"):
        parse_labels([bad])
