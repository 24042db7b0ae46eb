"""run_rule_tests with an injected scenario loader, and the `rules test` command."""
from cli import rules_commands
from rules.engine import loader
from rules.engine.loader import load_rule_text
from rules.engine.testing import run_rule_tests
from tests.rules.helpers import events, rule_text

RULE = rule_text("match:\n  e: {kind: error, name|contains: Capture}\ncondition: e\n"
                 "tests:\n  fires: [s/abort]\n  quiet: [s/healthy, s/abort]\n").replace("experimental", "stable")


def scenarios(tmp_path):
    for name in ("abort", "healthy"):
        (tmp_path / "s" / name).mkdir(parents=True)
    calls = []

    def diagnose(path):
        calls.append(path.name)
        kind = "error" if path.name == "abort" else "kernel"
        return events([{"ts": 1, "kind": kind, "name": "CaptureAborted"}])
    return diagnose, calls


def test_fires_and_quiet_scenarios_pass_or_fail_with_a_reason(tmp_path):
    diagnose, calls = scenarios(tmp_path)
    results = run_rule_tests(load_rule_text(RULE), tmp_path, diagnose)
    assert [(r.expect, r.scenario, r.passed) for r in results] == [
        ("fires", "s/abort", True), ("quiet", "s/healthy", True), ("quiet", "s/abort", False)]
    assert results[0].reason == "1 finding(s): 1 rows"
    assert results[2].reason.startswith("fired 1 finding(s), expected none")
    assert sorted(calls) == ["abort", "healthy"]          # each scenario loaded once


def test_a_quiet_failure_says_what_matched(tmp_path):
    diagnose, _ = scenarios(tmp_path)
    rule = RULE.replace("fires: [s/abort]", "fires: [s/healthy]")
    results = run_rule_tests(load_rule_text(rule), tmp_path, diagnose)
    assert not results[0].passed
    assert results[0].reason == "no finding; rows matched per selection: e=0 (of 1 events)"


def test_missing_escaping_and_broken_scenarios_fail_cleanly(tmp_path):
    diagnose, _ = scenarios(tmp_path)
    rule = RULE.replace("fires: [s/abort]", "fires: [s/nope, ../outside, s/healthy/..]")

    def broken(path):
        raise ValueError("bad trace") if path.name == "s" else diagnose(path)
    reasons = [r.reason for r in run_rule_tests(load_rule_text(rule), tmp_path, broken)][:3]
    assert reasons[0].startswith("scenario not found under")
    assert reasons[1] == "scenario path leaves its root"
    assert reasons[2] == "could not load the scenario: ValueError: bad trace"


def test_stable_rules_need_fires_and_quiet(tmp_path):
    rule = rule_text("match:\n  e: {kind: error}\ncondition: e\n").replace("experimental", "stable")
    results = run_rule_tests(load_rule_text(rule), tmp_path, lambda p: events([]))
    assert [(r.expect, r.passed) for r in results] == [("status", False)]
    assert "needs at least one `fires` and one `quiet`" in results[0].reason


def test_min_severity_gates_what_counts_as_firing(tmp_path):
    diagnose, _ = scenarios(tmp_path)
    rule = RULE.replace("  quiet: [s/healthy, s/abort]", "  quiet: [s/abort]\n  min_severity: error")
    results = run_rule_tests(load_rule_text(rule), tmp_path, diagnose)      # the rule is only a warning
    assert [(r.expect, r.passed) for r in results] == [("fires", False), ("quiet", True)]


def test_test_main_exit_codes(tmp_path, monkeypatch, capsys):
    diagnose, _ = scenarios(tmp_path)
    monkeypatch.setattr(rules_commands, "scenario_events", diagnose)
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    (rules_dir / "r.yaml").write_text(RULE.replace(", s/abort]", "]"))
    assert rules_commands.test_main(str(rules_dir), str(tmp_path)) == 0
    (rules_dir / "r.yaml").write_text(RULE)
    assert rules_commands.test_main(str(rules_dir), str(tmp_path)) == 1
    out = capsys.readouterr().out
    assert "FAIL test.rule quiet s/abort: fired 1 finding(s)" in out
    assert loader.BUILTIN_DIR.name == "builtin"
