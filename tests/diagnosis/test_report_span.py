"""The report's time span covers the artifacts placed on the common clock; one left on its own
clock is said so on the artifact and in the report, and does not stretch the span."""
from __future__ import annotations

import os
import shutil

import pytest

from diagnosis.engine.pipeline import diagnose
from ingest.engine.artifact_results import parse_one
from tests.corpus import CORPUS, corpus

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not found")


def _report(tmp_path, *paths):
    tmp_path.mkdir(exist_ok=True)
    results = []
    for p in paths:
        dst = tmp_path / p.name
        shutil.copy2(p, dst)
        results.append(parse_one(p.name, dst, tmp_path))
    return diagnose(results).to_dict()


def test_a_capture_on_its_own_clock_does_not_stretch_the_span(tmp_path):
    nvml = corpus("h200", "nvml", "nvml_samples.jsonl")
    alone = _report(tmp_path / "alone", nvml)
    both = _report(tmp_path / "both", nvml, corpus("cpu", "tokenizer_hotspot.perf-script.txt"))
    perf = next(a for a in both["trace"]["alignment"] if a["artifact"].endswith("perf-script.txt"))
    assert not perf["aligned"]  # monotonic, no offset given
    assert (both["trace"]["start_ts"], both["trace"]["end_ts"]) == (alone["trace"]["start_ts"], alone["trace"]["end_ts"])


def test_a_log_no_evidence_dates_is_left_as_read_and_said_so(tmp_path):
    # the corpus's NCCL incident: its dump dates it; the same log written 40 days earlier cannot be placed
    folder = corpus("h200", "nccl_timeout")
    log = (folder / "rank0.log").read_text()
    shifted = tmp_path / "src" / "other_day.log"
    shifted.parent.mkdir()
    shifted.write_text(log.replace("[E1129", "[E1020").replace("[I1129", "[I1020").replace("[W1129", "[W1020"))
    os.utime(shifted, (0, 0))
    report = _report(tmp_path / "upload", folder / "nccl_trace_rank_0", shifted)
    plan = next(a for a in report["trace"]["alignment"] if a["artifact"] == "other_day.log")
    entry = next(a for a in report["trace"]["artifacts"] if a["path"] == "other_day.log")
    assert not plan["aligned"] and plan["warning"] in entry["warnings"] and plan["warning"] in report["trace"]["warnings"]
    dump = next(a for a in report["trace"]["artifacts"] if a["path"] == "nccl_trace_rank_0")
    assert (report["trace"]["start_ts"], report["trace"]["end_ts"]) == (dump["start_ts"], dump["end_ts"])
