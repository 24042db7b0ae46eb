"""Two multi-rank incidents uploaded together (each in its own folder, as an on-call engineer
zips them) stay two incidents: each job's ranks are reasoned about with each other only, so the
upload's clusters are those of each folder alone, one cluster per incident, never one for two
and never a cross-job finding (one job's rank 0 "waiting" for the other's rank 1)."""
from __future__ import annotations

import shutil
from itertools import combinations

import pytest

from diagnosis.engine import scenarios
from tests.acceptance.test_clock_combinations import FIXTURES, INCIDENTS

PRESENT = [i for i in INCIDENTS if (FIXTURES / i).is_dir()]


def heads(report: dict) -> list[str]:
    return sorted(c["root_cause"] for c in report["clusters"])


@pytest.mark.parametrize("a,b", list(combinations(PRESENT, 2)), ids=lambda i: i.replace("/", ":"))
def test_two_incidents_in_one_upload_keep_their_own_diagnoses(a, b, tmp_path):
    upload = tmp_path / "upload"
    for incident in (a, b):
        shutil.copytree(FIXTURES / incident, upload / incident.replace("/", "__"))
    together = heads(scenarios.report(upload))
    assert together == sorted(heads(scenarios.report(FIXTURES / a)) + heads(scenarios.report(FIXTURES / b)))
