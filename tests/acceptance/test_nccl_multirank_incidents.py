"""The real 2 x H200 incidents of tests/fixtures/nccl_multirank through the whole pipeline.

Independent checks come from the raw files, read here with gzip/json/re: the rank logs, the
Kineto traces, and the output of PyTorch's own `fr_trace` analyzer saved beside the captures.
"""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from diagnosis.engine import scenarios

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nccl_multirank"
SEVERITIES = ["info", "warning", "error", "critical"]


def report(incident: str) -> dict:
    return scenarios.report(FIXTURES / incident)


def analyzer(incident: str) -> str:
    return (FIXTURES / "analyzer" / f"{incident}.fr_trace.txt").read_text()


def log(incident: str, rank: int) -> str:
    return gzip.open(FIXTURES / incident / f"rank{rank}.log.gz", "rt").read()


def serious(rep: dict) -> list[dict]:
    return [f for f in rep["findings"] if SEVERITIES.index(f["severity"]) >= SEVERITIES.index("warning")]


def test_peer_missing_names_the_rank_that_never_joined():
    # what the logs say: rank 0 timed out on seq 6; rank 1 had enqueued only up to 5
    timed_out = re.search(r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+)", log("peer_missing", 0))
    rank1_last = re.search(r"Last enqueued NCCL work: (\d+)", log("peer_missing", 1))
    seq, last = int(timed_out.group(1)), int(rank1_last.group(1))
    assert last < seq
    # what torch's analyzer concluded from the same dumps
    text = analyzer("peer_missing")
    assert f"sequence number: {seq}" in text and "missing ranks: {1}" in text

    rep = report("peer_missing")
    findings = serious(rep)
    assert [f["root_cause"] for f in findings] == ["nccl.timeout.peer_missing"]
    assert len(rep["clusters"]) == 1 and rep["clusters"][0]["root_cause"] == "nccl.timeout.peer_missing"
    explanation = findings[0]["explanation"]
    assert f"seq {seq}" in explanation
    assert "waiting for rank(s) 1," in explanation and f"last enqueued collective is {last} on rank 1" in explanation
    # the collective-duration SLO broke, and this finding explains it
    slo = [v for v in rep["violations"] if v["slo"] == "collective_duration"]
    assert slo and findings[0]["id"] in slo[0]["findings"]


def test_collective_mismatch_names_the_rank_and_what_differs():
    text = analyzer("collective_mismatch")
    m = re.search(r"Collective sequence number: (\d+) has errors.*?Culprit rank (\d+); Error type: (\w+), "
                  r"Expected input sizes: '(.*?)' does not match found input sizes: '(.*?)'", text, re.S)
    seq, culprit, kind, expected, found = m.groups()
    assert kind == "SIZE_OR_SYNTAX_MISMATCH"

    rep = report("collective_mismatch")
    findings = serious(rep)
    assert [f["root_cause"] for f in findings] == ["nccl.collective_mismatch"]
    assert [f["severity"] for f in findings] == ["critical"]
    assert len(rep["clusters"]) == 1
    f = findings[0]
    assert f["explanation"].startswith(f"Rank(s) {culprit} called nccl:all_reduce seq {seq} ")
    assert f"input sizes {found} on rank {culprit}, where rank(s) [0] passed {expected}" in f["explanation"]
    assert f["evidence"][0]["artifact"] == f"nccl_trace_rank_{culprit}"


def _collective_calls_us(incident: str, rank: int) -> list[float]:
    """Start times (us) of the all_reduce calls in one rank's Kineto trace, in call order."""
    trace = json.load(gzip.open(FIXTURES / incident / f"kineto_rank{rank}.json.gz", "rt"))
    return sorted(e["ts"] for e in trace["traceEvents"]
                  if e.get("ph") == "X" and e.get("name") == "record_param_comms")


def _longest_nccl_kernel_ms(incident: str, rank: int) -> float:
    trace = json.load(gzip.open(FIXTURES / incident / f"kineto_rank{rank}.json.gz", "rt"))
    return max(e["dur"] for e in trace["traceEvents"]
               if e.get("ph") == "X" and e.get("name", "").startswith("ncclDevKernel")) / 1000


def test_straggler_names_the_late_rank_and_its_delay():
    # rank 1's host stopped between its 5th and 6th all_reduce calls; rank 0's did not
    r0, r1 = _collective_calls_us("straggler", 0), _collective_calls_us("straggler", 1)
    gap1_ms, gap0_ms = (r1[5] - r1[4]) / 1000, (r0[5] - r0[4]) / 1000
    assert gap1_ms > 1500 > 10 > gap0_ms
    waited_ms = _longest_nccl_kernel_ms("straggler", 0)   # rank 0's all_reduce kernel waited for it
    assert "has errors" not in analyzer("straggler")      # torch's analyzer sees nothing wrong

    rep = report("straggler")
    findings = serious(rep)
    assert [(f["root_cause"], f["severity"], f["slo"]) for f in findings] == [("nccl.straggler", "warning",
                                                                               "collective_duration")]
    assert len(rep["clusters"]) == 1
    text = findings[0]["explanation"]
    assert text.startswith("Rank 1 is the straggler: rank 1 reached nccl:all_reduce seq 6 ")
    lag = float(re.search(r"seq 6 of process group 0 \(default_pg\) ([\d,]+) ms after rank 0", text).group(1).replace(",", ""))
    assert lag == pytest.approx(gap1_ms, rel=0.05)
    ran = float(re.search(r"whose collective ran ([\d,]+) ms", text).group(1).replace(",", ""))
    assert ran == pytest.approx(waited_ms, abs=1)


def test_healthy_run_is_quiet():
    assert analyzer("healthy").strip() == ""   # torch's analyzer found nothing either
    rep = report("healthy")
    assert serious(rep) == []
    assert rep["clusters"] == [] or all(c["severity"] == "info" for c in rep["clusters"])
    assert not [v for v in rep["violations"] if v["slo"] == "collective_duration"]


@pytest.mark.parametrize("incident", ["peer_missing", "collective_mismatch", "straggler", "healthy"])
def test_every_artifact_parses(incident):
    rep = report(incident)
    formats = sorted(a["format"] for a in rep["trace"]["artifacts"])
    assert formats == sorted(["flight_recorder"] * 2 + ["kineto"] * 2 + ["log"] * 2 + ["nvml_jsonl"])
    assert rep["rule_errors"] == []
