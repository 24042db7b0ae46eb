"""Real incidents captured on 2 x NVIDIA H200 (tests/fixtures/h200_open_world, see its README):
each folder, diagnosed alone, must be headed by the root cause its EXPECTED.yaml gives, at that
severity or above; consequences (`not_headline`) must not head a cluster of their own; healthy
folders raise nothing at warning or above."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from diagnosis.engine import scenarios
from tests.acceptance.findings import assert_diagnosis

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "h200_open_world"
ENTRIES = yaml.safe_load((ROOT / "EXPECTED.yaml").read_text())


def test_every_captured_folder_is_labelled():
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert folders == {e["folder"] for e in ENTRIES}


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["folder"] for e in ENTRIES])
def test_diagnosed_as_a_person_would(entry: dict):
    report = scenarios.report(ROOT / entry["folder"])
    assert_diagnosis(report, entry)
