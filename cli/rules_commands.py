"""What the `rules` commands do: `validate FILE...`, `test [DIR]`, `features`, `coverage`
(their arguments: cli/rules_parser.py).

An adapter over the engine, not part of it: it reads corpus scenarios through the diagnosis
(`diagnosis.engine.scenarios`, `diagnosis.engine.coverage`).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from diagnosis.engine.coverage import write_coverage
from diagnosis.engine.scenarios import events
from rules.engine.features import list_features
from rules.engine.loader import RuleError, check_files, load_rule_dirs, load_rule_files
from rules.engine.rule_files import rule_files
from rules.engine.rule_warnings import rule_warnings
from rules.engine.testing import run_rule_tests


def validate_main(paths) -> int:
    """Prints `file:line:col: message` per problem; 0 when every rule is valid, 1 otherwise.
    Warnings about valid rules (rules.engine.rule_warnings) go to stderr and never fail the run."""
    rules, errors = check_files(paths)
    for e in errors:
        print(e)
    for w in rule_warnings(rules):
        print(w, file=sys.stderr)
    if errors:
        print(f"{len(errors)} problem(s)", file=sys.stderr)
        return 1
    files = rule_files(paths)
    print(f"ok: {len(files)} file(s) valid", file=sys.stderr)
    return 0


def scenario_events(path: Path) -> pd.DataFrame:
    """The real ingest of one corpus scenario (a file or a folder) as one event table."""
    return events(path)


def test_main(rules_dir, corpus_root) -> int:
    """Runs the fires/quiet scenarios of the rules in `rules_dir` (default: the builtin pack)."""
    try:
        rules = load_rule_files([rules_dir]) if rules_dir else load_rule_dirs(None)
    except (RuleError, FileNotFoundError) as e:
        print(e)
        return 1
    results = run_rule_tests(rules, corpus_root, scenario_events)
    for r in results:
        print(r.line())
    failed = sum(not r.passed for r in results)
    print(f"{len(results) - failed} passed, {failed} failed ({len(rules)} rules)", file=sys.stderr)
    return 1 if failed else 0


test_main.__test__ = False  # a CLI entry, not a pytest test


def features_main() -> int:
    print("| feature | rows |\n|---|---|")
    for f in list_features():
        print(f"| `{f['name']}` | {f['doc']} |")
    return 0


def coverage_main(corpus_root: str, output: str, rules_dir: str | None) -> int:
    return write_coverage(corpus_root, output, rules_dir=rules_dir)
