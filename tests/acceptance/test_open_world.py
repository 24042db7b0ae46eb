"""Real incidents from public issue threads, by family (tests/fixtures/open_world/*/EXPECTED.yaml):
each file alone must be diagnosed with the expected root cause as a cluster headline, at the
expected severity or above; healthy files (`root_cause: none`) raise nothing at warning or above."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from diagnosis.engine import scenarios
from tests.acceptance.findings import assert_diagnosis

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "open_world"


def _cases():
    for expected in sorted(ROOT.glob("*/EXPECTED.yaml")):
        for entry in yaml.safe_load(expected.read_text()) or []:
            yield pytest.param(expected.parent / entry["file"], entry,
                               id=f"{expected.parent.name}/{entry['file']}")


CASES = list(_cases())


def test_every_family_has_examples():
    families = {c.values[0].parent.name for c in CASES}
    assert len(CASES) >= 40 and len(families) >= 8, (len(CASES), sorted(families))


@pytest.mark.parametrize("path,entry", CASES)
def test_diagnosed_as_a_person_would(path: Path, entry: dict):
    assert path.is_file(), f"{path.name} listed in EXPECTED.yaml but missing"
    report = scenarios.report(path)
    assert_diagnosis(report, entry)
