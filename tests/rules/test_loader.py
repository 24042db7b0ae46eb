"""Loading, validation messages with line/col, hostile rule files, the builtin + team layering."""
import time

import pytest
from jsonschema import Draft202012Validator

from cli import rules_commands
from rules.engine import limits, loader
from rules.engine.loader import RuleError, check_text, load_rule_dirs, load_rule_text, validate_files
from rules.engine.schema_errors import schema
from tests.rules.helpers import events, rule_text, run
from tests.support.stack import ROOT


def errors_of(text):
    return check_text(text, "r.yaml")[1]


def only_error(text) -> RuleError:
    errs = errors_of(text)
    assert len(errs) == 1, [str(e) for e in errs]
    return errs[0]


def test_schema_is_valid_json_schema_2020_12():
    Draft202012Validator.check_schema(schema())
    assert schema()["$schema"].endswith("2020-12/schema")


def test_design_example_loads_and_keeps_its_source():
    text = rule_text("match:\n  errors: {kind: error}\ncondition: errors\n") + "---\n" + \
        rule_text("match:\n  errors: {kind: oom}\ncondition: errors\n", name="second")
    rules = load_rule_text(text, "two.yaml")
    assert [r.id for r in rules] == ["test.rule", "test.second"]
    assert rules[1].line == 11 and rules[1].source.startswith("id: test.second")
    assert rules[0].file == "two.yaml" and rules[0].to_dict()["match"] == {"errors": {"kind": "error"}}


def test_unknown_selection_in_condition_names_the_defined_ones():
    e = only_error(rule_text("match:\n  errors: {kind: error}\n  benign: {name: ok}\ncondition: erors and not benign\n"))
    assert str(e) == ("r.yaml:9:12: condition names selection 'erors' which is not defined under match "
                      "(defined: errors, benign)")


def test_position_inside_the_condition_points_at_the_word():
    e = only_error(rule_text("match:\n  a: {kind: error}\n  b: {name: ok}\ncondition: a and not bb\n"))
    assert (e.line, e.col) == (9, 22)


@pytest.mark.parametrize("body, line, col, message", [
    ("match:\n  a: {kind: error}\ncondition: a\nserverity: x\n", 9, 1, "unknown key 'serverity' in the rule (did you mean 'severity'?)"),
    ("match:\n  a: {kind: error, name|regex: x}\ncondition: a\n", 7, 20, "unknown modifier |regex"),
    ("match:\n  a: {kind: error, colour: red}\ncondition: a\n", 7, 20, "unknown field 'colour'"),
    ("match:\n  a: {dur|contains: x}\ncondition: a\n", 7, 7, "dur is a number"),
    ("match:\n  a: {name|gt: 3}\ncondition: a\n", 7, 7, "name is text"),
    ("match:\n  a: {dur|gt: tenms}\ncondition: a\n", 7, 7, "not a number, a duration"),
    ("match:\n  a: {name|re: '(a)\\1'}\ncondition: a\n", 7, 7, "does not compile in RE2"),
    ("match:\n  a: {name|re: 'x(?=y)'}\ncondition: a\n", 7, 7, "no backreferences or lookaround"),
    ("match:\n  a: {kind: error}\ncondition: a\naggregate:\n  window: 500us\n", 10, 11, "shorter than the smallest window"),
    ("match:\n  a: {kind: error}\ncondition: a\naggregate:\n  window: 10 parsecs\n", 10, 11, "aggregate.window"),
    ("match:\n  a: {kind: error}\ncondition: a\naggregate:\n  having: p99 > 1\n", 10, 15, "expected '(' after p99"),
    ("match:\n  a: {kind: error}\ncondition: a\naggregate:\n  having: bogus(dur) > 1\n", 10, 11, "unknown aggregate 'bogus'"),
    ("match:\n  a: {from: no_such_feature, value|gt: 1}\ncondition: a\n", 7, 7, "unknown feature 'no_such_feature'"),
    ("match:\n  a: {kind: error}\n  b: {kind: oom}\ncondition: a\n", 8, 3, "selection 'b' is defined but never used"),
    ("match:\n  a: {kind: error}\ncondition: 2 of a\n", 8, 12, "can never hold"),
    ("match:\n  a: {kind: error}\naggregate: {by: [host]}\nsequence: {steps: [a, a], within: 1s}\n", 9, 1, "use either"),
    ("match:\n  a: {kind: error}\ncondition: a\nsequence: {steps: [a, a], within: 1s}\n", 8, 12, "remove `condition`"),
])
def test_messages_point_at_line_and_column(body, line, col, message):
    e = only_error(rule_text(body))
    assert message in e.message, str(e)
    assert (e.line, e.col) == (line, col), str(e)


def test_schema_errors_for_header_fields():
    text = rule_text("match:\n  a: {kind: error}\ncondition: a\n").replace("severity: warning", "severity: high") \
        .replace("id: test.rule", "id: NotDotted")
    msgs = sorted(e.message for e in errors_of(text))
    assert msgs == ["id: 'NotDotted' is not a dotted lowercase id like cuda-graph.capture-aborted "
                    "(letters, digits, _ and -; at least one dot)",
                    "severity: 'high' is not one of info, warning, error, critical"]


def test_duplicate_keys_and_ids_are_reported():
    e = only_error(rule_text("match:\n  a: {kind: error}\ncondition: a\ncondition: a\n"))
    assert "duplicate key 'condition' (first defined at line 8)" in e.message and e.line == 9
    text = rule_text("match:\n  a: {kind: error}\ncondition: a\n")
    e = only_error(text + "---\n" + text)
    assert "rule id 'test.rule' is already used at line 1" in e.message


def test_yaml_alias_bomb_is_refused_before_expansion():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(8))
    started = time.perf_counter()
    e = only_error(bomb)
    assert time.perf_counter() - started < 0.5
    assert (e.line, e.col) == (1, 4) and "anchors (&a) are not allowed" in e.message
    e = only_error("id: *x\n")
    assert "aliases (*x) are not allowed" in e.message


def test_ten_megabyte_rule_is_refused_without_parsing(tmp_path):
    big = rule_text("match:\n  a: {kind: error}\ncondition: a\n") + "description: '" + "x" * (10 * 1024 * 1024) + "'\n"
    e = only_error(big)
    assert "limit 262,144" in e.message and (e.line, e.col) == (1, 1)
    path = tmp_path / "big.yaml"
    path.write_text(big)
    errs = validate_files([path])
    assert len(errs) == 1 and "larger than 262,144 bytes" in errs[0].message


def test_deep_nesting_is_refused():
    e = only_error("x: " + "[" * 40 + "]" * 40 + "\n")
    assert f"deeper than {limits.MAX_YAML_DEPTH}" in e.message


def test_catastrophic_regex_is_accepted_and_runs_in_linear_time():
    n = 100_000
    frame = events([{"ts": 0, "kind": "log", "name": "a" * n + "!"}, {"ts": 1, "kind": "log", "name": "a" * n},
                    {"ts": 2, "kind": "log", "name": "b"}])
    started = time.perf_counter()
    findings = run("match:\n  sel: {name|re: '(a+)+$'}\ncondition: sel\n", frame)
    assert time.perf_counter() - started < 1.0        # Python's re would not finish
    assert findings[0].metrics["count"] == 1
    started = time.perf_counter()
    findings = run("match:\n  sel: {kind: log, attrs.text|re: '(a+)+$'}\ncondition: sel\n",
                   events([{"ts": 0, "kind": "log", "attrs": {"text": "a" * n + "!"}}]))
    assert time.perf_counter() - started < 1.0 and findings == []


def test_over_long_and_huge_regexes_are_refused():
    e = only_error(rule_text("match:\n  a: {name|re: '" + "a" * 1001 + "'}\ncondition: a\n"))
    assert "1001 characters long (limit 1000)" in e.message and (e.line, e.col) == (7, 7)
    e = only_error(rule_text("match:\n  a: {name|re: '((a{100}){100}){100}'}\ncondition: a\n"))
    assert "RE2" in e.message


def test_deep_condition_is_refused():
    e = only_error(rule_text("match:\n  a: {kind: error}\ncondition: " + "not " * 40 + "a\n"))
    assert "deeper than 32" in e.message


def test_team_rules_override_builtins_by_id(tmp_path, monkeypatch):
    builtin, team = tmp_path / "builtin", tmp_path / "team"
    builtin.mkdir()
    team.mkdir()
    (builtin / "pack.yaml").write_text(rule_text("match:\n  a: {kind: error}\ncondition: a\n", name="shared") + "---\n"
                                       + rule_text("match:\n  a: {kind: oom}\ncondition: a\n", name="only_builtin"))
    (team / "mine.yaml").write_text(rule_text("match:\n  a: {kind: log}\ncondition: a\n", name="shared", severity="critical"))
    monkeypatch.setattr(loader, "BUILTIN_DIR", builtin)
    assert sorted(r.id for r in load_rule_dirs(None)) == ["test.only_builtin", "test.shared"]
    rules = {r.id: r for r in load_rule_dirs([team])}
    assert rules["test.shared"].severity == "critical" and rules["test.shared"].file.endswith("mine.yaml")
    assert rules["test.only_builtin"].severity == "warning"
    with pytest.raises(FileNotFoundError):
        load_rule_dirs([tmp_path / "missing"])


def test_builtin_pack_validates():
    assert validate_files([loader.BUILTIN_DIR]) == []


def test_builtin_pack_is_cached_until_a_rule_changes(tmp_path, monkeypatch):
    """The checked pack is read back from TRACEDOC_CACHE; an edited rule file is checked again."""
    builtin = tmp_path / "builtin"
    builtin.mkdir()
    pack = builtin / "pack.yaml"
    pack.write_text(rule_text("match:\n  a: {kind: error}\ncondition: a\n", name="one"))
    monkeypatch.setattr(loader, "BUILTIN_DIR", builtin)
    monkeypatch.setenv("TRACEDOC_CACHE", str(tmp_path / "cache"))
    first = load_rule_dirs(None)
    assert (tmp_path / "cache" / "builtin-rules.marshal").is_file()

    def no_checks(*args, **kwargs):
        raise AssertionError("a cached pack is not checked again")
    with monkeypatch.context() as m:
        m.setattr(loader, "check_text", no_checks)
        assert load_rule_dirs(None) == first
    pack.write_text(rule_text("match:\n  a: {kind: oom}\ncondition: a\n", name="one", severity="critical"))
    assert [r.severity for r in load_rule_dirs(None)] == ["critical"]
    pack.write_text(rule_text("match:\n  a: {kind: oom}\ncondition: b\n", name="one"))
    with pytest.raises(RuleError):  # a broken pack is never served from the cache
        load_rule_dirs(None)
    monkeypatch.setenv("TRACEDOC_CACHE", "")  # empty: no cache at all
    pack.write_text(rule_text("match:\n  a: {kind: oom}\ncondition: a\n", name="one"))
    assert [r.id for r in load_rule_dirs(None)] == ["test.one"]


def test_validate_main_prints_file_line_col(tmp_path, capsys):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(rule_text("match:\n  a: {kind: error}\ncondition: a\n"))
    bad.write_text(rule_text("match:\n  a: {kind: error}\ncondition: b\n"))
    assert rules_commands.validate_main([str(good)]) == 0
    assert rules_commands.validate_main([str(good), str(bad)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [f"{bad}:8:12: condition names selection 'b' which is not defined under match (defined: a)"]


def test_the_guide_example_is_a_valid_rule():
    import re
    guide = (ROOT / "docs" / "rules.md").read_text()
    example = re.findall(r"```yaml\n(id: .*?)```", guide, re.S)[0]
    assert [r.id for r in load_rule_text(example, "docs/rules.md")] == ["cuda-graph.capture-aborted"]


def test_docs_list_every_feature():
    """docs/rules.md keeps the table `tracedoc rules features` prints."""
    from rules.engine.features import get_feature, list_features
    from tests.corpus import ROOT
    docs = (ROOT / "docs" / "rules.md").read_text()
    shipped = [f["name"] for f in list_features()  # other tests register features of their own
               if get_feature(f["name"]).fn.__module__.startswith("rules.engine.features.")]
    missing = [name for name in shipped if f"| `{name}` |" not in docs]
    assert not missing, f"regenerate the table with `tracedoc rules features`: {missing}"
