"""The `Report` component the API serves (generated from the report's msgspec Structs, through
diagnosis.api.report_schema) describes real reports: every golden corpus report and a fresh
diagnosis validate against it, and no report holds a key the schema does not name, so the
report and its schema cannot drift apart."""
from __future__ import annotations

import json

import jsonschema
import pytest

from diagnosis.engine import scenarios
from diagnosis.engine.results import Report
from tests.acceptance.golden import GOLDEN
from tests.corpus import CORPUS
from tests.support.openapi_check import published_schema, response_schema

REPORT_PATH = "/api/v1/traces/{id}/report/"


def _closed(node):
    """Every described object closed to keys it does not name (what a drift would add)."""
    if isinstance(node, list):
        return [_closed(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _closed(v) for k, v in node.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


@pytest.fixture
def report_validator(alice_api):
    schema = response_schema(published_schema(alice_api), "get", REPORT_PATH, 200)
    return jsonschema.Draft202012Validator(_closed(schema))


def _problems(validator, report: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(report)][:5]


def test_every_golden_corpus_report_matches_the_served_component(report_validator):
    goldens = sorted(GOLDEN.glob("*.json"))
    assert len(goldens) > 50
    seen = {"capture": 0, "violations": 0, "internal_error": 0}
    for path in goldens:
        report = json.loads(path.read_text())
        assert not _problems(report_validator, report), (path.name, _problems(report_validator, report))
        seen["capture"] += sum("capture" in f for f in report["findings"])
        seen["violations"] += len(report["violations"])
        seen["internal_error"] += sum("internal_error" in a for a in report["trace"]["artifacts"])
    assert seen["capture"] and seen["violations"], seen  # the optional shapes were checked too


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not found")
def test_a_fresh_diagnosis_and_its_read_back_match_the_served_component(report_validator):
    report = scenarios.report(CORPUS / "h200" / "cudagraph_abort")
    assert report["findings"] and report["clusters"]
    assert not _problems(report_validator, report)
    assert not _problems(report_validator, Report.from_dict(report).to_dict())


def test_a_report_missing_a_key_it_always_writes_is_refused(report_validator):
    report = json.loads(sorted(GOLDEN.glob("*.json"))[0].read_text())
    del report["trace"]["events"]
    report["findings"] = [{**f, "extra": 1} for f in report["findings"]] or [{"extra": 1}]
    problems = " ".join(_problems(report_validator, report))
    assert "'events' is a required property" in problems and "extra" in problems
