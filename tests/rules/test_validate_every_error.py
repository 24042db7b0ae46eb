"""`tracedoc rules validate` lists every error of a file (issue 32): each with its file, line,
column and what was expected, not only the first of each rule. A rule whose selection does
not compile still has its condition and templates checked; one whose schema faults are only
in what is not compiled (severity, missing version) still has its match, condition and
templates checked."""
import subprocess
import sys
from pathlib import Path

from rules.engine.loader import check_text

ROOT = Path(__file__).resolve().parents[2]
TEXT = """\
id: team.first-bad
title: first
severity: eror
root_cause: gpu.idle
match:
  errors: {name|contians: "x"}
condition: erors
explain: "x {metrics.nope_thing}"
---
id: team.second-bad
title: second
version: 1
status: experimental
severity: error
root_cause: gpu.idle
match:
  errors: {name|contains: "x"}
condition: errors and
explain: "{nope}"
capture: {kind: nothing}
---
id: team.fine
title: fine
version: 1
status: experimental
severity: warning
root_cause: gpu.idle
match:
  errors: {name|contains: "x"}
condition: errors
explain: "{count} matched"
"""
EXPECTED = [  # (line, col, words of the message)
    (1, 1, "missing the required key 'version'"),
    (1, 1, "missing the required key 'status'"),
    (3, 11, "'eror' is not one of info, warning, error, critical"),
    (6, 12, "unknown modifier |contians"),
    (7, 12, "condition names selection 'erors' which is not defined under match (defined: errors)"),
    (8, 10, "{metrics.nope_thing}: not an aggregate"),
    (18, 22, "expected a selection name at the end"),
    (19, 10, "unknown placeholder {nope} (allowed: count"),
    (20, 10, "capture.kind: expected one of profiler"),
]


def test_every_error_of_every_rule_is_listed_in_order():
    rules, errors = check_text(TEXT, "team.yaml")
    assert [r.id for r in rules] == ["team.fine"]
    assert [(e.line, e.col) for e in errors] == [(line, col) for line, col, _ in EXPECTED]
    for error, (_, _, words) in zip(errors, EXPECTED):
        assert words in error.message, (error, words)


def test_the_command_prints_each_as_file_line_col(tmp_path):
    rule_file = tmp_path / "team.yaml"
    rule_file.write_text(TEXT)
    run = subprocess.run([sys.executable, "-m", "cli.main", "rules", "validate", str(rule_file)],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert lines == [f"{rule_file}:{line}:{col}: {e.message}" for (line, col, _), e in
                     zip(EXPECTED, check_text(TEXT, str(rule_file))[1])]
    assert f"{len(EXPECTED)} problem(s)" in run.stderr


def test_a_valid_rule_still_compiles_and_a_selection_error_alone_is_one_error():
    fine = TEXT.split("---\n")[2]
    assert check_text(fine)[1] == []
    one = fine.replace("name|contains", "name|contians")
    assert [e.line for e in check_text(one)[1]] == [8]
