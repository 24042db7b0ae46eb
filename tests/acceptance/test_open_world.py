"""Real incidents from public issue threads, by family (tests/fixtures/open_world/*/EXPECTED.yaml):
each file alone must be diagnosed with the expected root cause as a cluster headline, at the
expected severity or above; healthy files (`root_cause: none`) raise nothing at warning or above."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from diagnosis import scenarios
from diagnosis.severity import RANK
from tests.acceptance.findings import by_root

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
    found = by_root(report)
    for key in entry.get("absent") or []:
        assert key not in found, f"{key} reported: {found}"
    if entry["root_cause"] == "none":
        loud = {k: s for k, s in found.items() if RANK[s] >= RANK["warning"]}
        assert not loud, f"healthy file raised {loud}"
        return
    key, severity = entry["root_cause"], entry["severity"]
    assert key in found, f"expected {key}, got {found}"
    assert RANK[found[key]] >= RANK[severity], f"{key} at {found[key]}, expected >= {severity}"
    headlines = {c["root_cause"] for c in report["clusters"]}
    assert key in headlines, f"{key} is not a cluster headline: {sorted(headlines)}"
