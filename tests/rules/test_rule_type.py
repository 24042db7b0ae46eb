"""The loaded Rule carries each key of its document as an attribute, and the compiler reads
those (not the raw `data` dict the API shows and the pack cache stores)."""
from rules.engine.compiler import compile_rule
from rules.engine.loader import load_rule_text
from tests.rules.helpers import rule_text


def test_the_document_keys_are_attributes():
    (rule,) = load_rule_text(rule_text("match:\n  a: {kind: error}\ncondition: a\naggregate: {having: count >= 2}\n"
                                       "capture: {kind: nvml_burst, duration_s: 30}\n"))
    assert rule.match == {"a": {"kind": "error"}} and rule.condition == "a"
    assert rule.aggregate == {"having": "count >= 2"} and rule.sequence is None
    assert rule.capture == {"kind": "nvml_burst", "duration_s": 30}
    assert rule.capture_plan is not None and rule.capture_plan.kind == "nvml_burst"
    (sequence,) = load_rule_text(rule_text("match:\n  a: {kind: error}\n  b: {kind: oom}\n"
                                           "sequence: {steps: [a, b], within: 1s}\n"))
    assert sequence.condition is None and sequence.sequence == {"steps": ["a", "b"], "within": "1s"}


def test_the_compiler_reads_the_attributes():
    (rule,) = load_rule_text(rule_text("match:\n  a: {kind: error}\n  b: {kind: oom}\ncondition: a or b\n"))
    rule.data = {}  # what the API shows: the compiler does not go back to it
    compiled = compile_rule(rule)
    assert sorted(compiled.selections) == ["a", "b"] and compiled.condition is not None
