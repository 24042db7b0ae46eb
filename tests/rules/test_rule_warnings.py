"""Warnings that do not refuse a rule (rules.engine.rule_warnings): found by registered validators,
printed by `rules validate` on stderr, never a failed run."""
import pytest

from cli import rules_commands
from rules.engine.loader import load_rule_text
from rules.engine.rule_warnings import rule_warnings, validator, validator_names
from tests.rules.helpers import rule_text

TESTED = "tests:\n  fires: [h200/cudagraph_abort]\n"


def _warnings(body: str) -> list[tuple[str, str]]:
    (rule,) = load_rule_text(rule_text(body), "team.yaml")
    return [(w.validator, w.message) for w in rule_warnings([rule])]


def test_a_clean_rule_has_no_warnings():
    assert _warnings("match:\n  a: {kind: error}\ncondition: a\ntags: [gpu, nccl]\n" + TESTED) == []


def test_each_validator_names_what_it_found():
    found = _warnings("match:\n  a: {kind: error}\n  b: {kind: error}\ncondition: a or b\n"
                      "tags: [gpu, nccl, gpu]\n")
    assert found == [
        ("no-fires-test", "rule 'test.rule' names no scenario under tests: fires, so `tracedoc rules test` "
                          "never shows it firing"),
        ("repeated-entry", "tags lists 'gpu' 2 times"),
        ("same-selection-twice", "selection 'b' is the same as 'a'"),
    ]


def test_selections_differing_in_one_value_are_not_the_same():
    assert _warnings("match:\n  a: {kind: error, name: x}\n  b: {name: x, kind: oom}\ncondition: a or b\n"
                     + TESTED) == []
    assert _warnings("match:\n  a: {kind: error, name: x}\n  b: {name: x, kind: error}\ncondition: a or b\n"
                     + TESTED) == [("same-selection-twice", "selection 'b' is the same as 'a'")]


def test_a_warning_points_at_the_rule():
    """At the line where its rule starts: the second document of the file, after a 9-line rule and ---."""
    text = rule_text("match:\n  a: {kind: error}\ncondition: a\n") + "---\n" + \
        rule_text("match:\n  a: {kind: error}\ncondition: a\ntags: [x, x]\n" + TESTED, name="second")
    rules = load_rule_text(text, "team.yaml")
    assert [str(w) for w in rule_warnings(rules) if w.validator == "repeated-entry"] == \
        ["team.yaml:11:1: warning: tags lists 'x' 2 times [repeated-entry]"]


def test_a_validator_name_is_registered_once():
    assert {"no-fires-test", "repeated-entry", "same-selection-twice"} <= set(validator_names())
    with pytest.raises(ValueError, match="registered twice"):
        validator("repeated-entry")(lambda rule: [])


def test_validate_prints_warnings_on_stderr_and_passes(tmp_path, capsys):
    warned = tmp_path / "warned.yaml"
    warned.write_text(rule_text("match:\n  a: {kind: error}\ncondition: a\ntags: [x, x]\n" + TESTED))
    assert rules_commands.validate_main([str(warned)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert f"{warned}:1:1: warning: tags lists 'x' 2 times [repeated-entry]" in err.splitlines()
