"""Severities are defined once (rules.engine.severity); the rule schema, a JSON file, must list the same."""
import json

from rules.engine.schema_errors import SCHEMA_PATH
from rules.engine.severity import SEVERITIES, at_least, highest


def test_the_rule_schema_lists_the_severities_in_order():
    schema = json.loads(SCHEMA_PATH.read_text())
    assert schema["properties"]["severity"]["enum"] == list(SEVERITIES)
    assert schema["properties"]["tests"]["properties"]["min_severity"]["enum"] == list(SEVERITIES)


def test_order():
    assert at_least("critical", "error") and not at_least("warning", "error")
    assert highest(["info", "critical", "warning"]) == "critical" and highest([]) == "info"
