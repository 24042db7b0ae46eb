"""Every corpus scenario and captured fixture gives the same JSON report as the stored one
(tests/fixtures/golden_reports, written by `python -m tests.acceptance.golden`): refactors and
speed-ups must not change what users see."""
import json

import pytest

from tests.acceptance.golden import GOLDEN, cases, file_name, normalized
from diagnosis.engine import scenarios

CASES = cases()


@pytest.mark.parametrize("case", sorted(CASES))
def test_report_is_unchanged(case):
    stored = GOLDEN / file_name(case)
    assert stored.is_file(), f"no golden report for {case}: run python -m tests.acceptance.golden"
    want = json.loads(stored.read_text())
    got = normalized(scenarios.report(CASES[case]))
    for key in ("findings", "clusters", "violations", "summary", "trace", "rule_errors", "suppressed"):
        assert got.get(key) == want.get(key), f"{case}: report[{key!r}] changed"
    assert got == want
