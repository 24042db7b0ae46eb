"""Every builtin rule's own `tests:` (fires / quiet scenarios of the corpus) pass."""
import pytest

from diagnosis.engine.scenarios import events
from rules.engine.loader import load_rule_dirs
from rules.engine.testing import run_rule_tests
from tests.corpus import CORPUS

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not found")

RULES = load_rule_dirs(None)


@pytest.fixture(scope="module")
def results():
    return run_rule_tests(RULES, CORPUS, events)


@pytest.mark.parametrize("rule_id", sorted(r.id for r in RULES))
def test_rule_fixtures(rule_id, results):
    mine = [r for r in results if r.rule_id == rule_id]
    failed = [f"{r.expect} {r.scenario}: {r.reason}" for r in mine if not r.passed]
    assert not failed, "\n".join(failed)


def test_every_stable_rule_has_fixtures():
    for rule in RULES:
        if rule.status == "stable":
            assert rule.tests.get("fires") and rule.tests.get("quiet"), rule.id
