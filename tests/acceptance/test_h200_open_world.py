"""Real incidents captured on 2 x NVIDIA H200 (tests/fixtures/h200_open_world, see its README):
each folder, diagnosed alone, must be headed by the root cause its EXPECTED.yaml gives, at that
severity or above; consequences (`not_headline`) must not head a cluster of their own; healthy
folders raise nothing at warning or above."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from diagnosis import scenarios
from diagnosis.severity import RANK
from tests.acceptance.findings import by_root

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "h200_open_world"
ENTRIES = yaml.safe_load((ROOT / "EXPECTED.yaml").read_text())


def test_every_captured_folder_is_labelled():
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert folders == {e["folder"] for e in ENTRIES}


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["folder"] for e in ENTRIES])
def test_diagnosed_as_a_person_would(entry: dict):
    report = scenarios.report(ROOT / entry["folder"])
    found = by_root(report)
    for key in entry.get("absent") or []:
        assert key not in found, f"{key} reported: {found}"
    if entry["root_cause"] == "none":
        loud = {k: s for k, s in found.items() if RANK[s] >= RANK["warning"]}
        assert not loud, f"healthy capture raised {loud}"
        return
    key, severity = entry["root_cause"], entry["severity"]
    assert key in found, f"expected {key}, got {found}"
    assert RANK[found[key]] >= RANK[severity], f"{key} at {found[key]}, expected >= {severity}"
    headlines = {c["root_cause"] for c in report["clusters"]}
    assert key in headlines, f"{key} is not a cluster headline: {sorted(headlines)}"
    consequences = set(entry.get("not_headline") or [])
    assert not consequences & headlines, f"consequence(s) head a cluster: {sorted(headlines)}"
    explained = " ".join(f["explanation"] for f in report["findings"] if f["root_cause"] == key)
    for text in entry.get("mentions") or []:
        assert text in explained, f"{text!r} not in the {key} explanation: {explained[:300]}"
