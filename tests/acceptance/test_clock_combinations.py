"""Every multi-rank incident's files, uploaded in every combination the fixtures allow, end on
one clock and keep their diagnosis.

Each incident folder is uploaded whole, as its logs alone, and as its logs with each single
dump; each of those three ways (a file's modification time is what a year-less log falls back
on, and archives and copies set it to anything):

* `as_captured`: the files as they are;
* `undated_epoch`: the logs' own full-date lines removed (a C++-only log) and one log's
  modification time set to 1970-01-01 (an archive member without times);
* `undated_next_year`: the same lines removed and every log's modification time a year later.

What must hold, checked against the files themselves (not against tracedoc's own output):

* an artifact with full timestamps keeps them (offset 0);
* a year-less log lands within a day of its peers, or is left unaligned with a warning on the
  artifact and in the report;
* no placed artifact's span leaves the upload's span, and the span is never more than a day
  longer than the incident's own (as captured);
* when the upload holds evidence of the true date (a dump, or a log with it), each log lands on
  the day it was written;
* the diagnosis (the root causes heading clusters) is the one the files give as captured.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from diagnosis.engine.pipeline import diagnose
from ingest.engine.artifact_results import parse_one

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
INCIDENTS = ["nccl_multirank/peer_missing", "nccl_multirank/collective_mismatch", "nccl_multirank/straggler",
             "nccl_multirank/healthy", "h200_open_world/nccl_op_mismatch_hang", "h200_open_world/nccl_peer_oom",
             "h200_open_world/kernel_fault_assert", "h200_open_world/healthy_2rank", "h200_rerun/nccl_timeout"]
DAY_S = 86_400
DATED_LINE = re.compile(rb"^\d{4}-\d\d-\d\d[ T]")
NEXT_YEAR = 365 * DAY_S


def _logs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if ".log" in p.name)


def _dumps(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.startswith("nccl_trace_rank_"))


def subsets(folder: Path) -> dict[str, list[Path]]:
    out = {"whole": sorted(p for p in folder.iterdir() if p.is_file()), "logs": _logs(folder)}
    for dump in _dumps(folder):
        out[f"logs+{dump.name}"] = _logs(folder) + [dump]
    return out


def _undated(src: Path, dst: Path) -> None:
    import gzip
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rb") as f:
        lines = [line for line in f if not DATED_LINE.match(line)]
    with opener(dst, "wb") as f:
        f.writelines(lines)


def upload(files: list[Path], variant: str, work: Path) -> dict:
    work.mkdir(parents=True)
    logs = [f for f in files if ".log" in f.name]
    results = []
    for f in files:
        dst = work / f.name
        if f in logs and variant != "as_captured":
            _undated(f, dst)
            mtime = 0 if variant == "undated_epoch" else f.stat().st_mtime + NEXT_YEAR
            if variant == "undated_next_year" or f == logs[-1]:
                os.utime(dst, (mtime, mtime))
        else:
            shutil.copy2(f, dst)
        results.append(parse_one(f.name, dst, work))
    return diagnose(results).to_dict()


def heads(report: dict) -> list[str]:
    return sorted(c["root_cause"] for c in report["clusters"])


CASES = [(i, s) for i in INCIDENTS if (FIXTURES / i).is_dir() for s in subsets(FIXTURES / i)]


@pytest.mark.parametrize("incident,subset", CASES, ids=[f"{i}:{s}" for i, s in CASES])
def test_one_clock_and_one_diagnosis_whatever_the_files_say_of_their_year(incident, subset, tmp_path):
    files = subsets(FIXTURES / incident)[subset]
    captured = upload(files, "as_captured", tmp_path / "as_captured")
    truth = {a["path"]: a for a in captured["trace"]["artifacts"]}
    span = captured["trace"]["end_ts"] - captured["trace"]["start_ts"]
    has_date_evidence = any(".log" not in f.name for f in files)
    for variant in ("as_captured", "undated_epoch", "undated_next_year"):
        report = captured if variant == "as_captured" else upload(files, variant, tmp_path / variant)
        trace = report["trace"]
        plans = {a["artifact"]: a for a in trace["alignment"]}
        artifacts = {a["path"]: a for a in trace["artifacts"]}
        for name, plan in plans.items():
            entry = artifacts[name]
            if plan["domain"] != "unix" or entry["start_ts"] is None:
                continue
            if ".log" not in name:
                assert plan["offset_ns"] == 0, (variant, plan)  # full timestamps are kept
                continue
            if not plan["aligned"]:  # left on its own clock: said, on the artifact and in the report
                assert plan["warning"] and plan["warning"] in entry["warnings"] and plan["warning"] in trace["warnings"]
                continue
            assert trace["start_ts"] <= entry["start_ts"] and entry["end_ts"] <= trace["end_ts"], (variant, name)
            if has_date_evidence or variant == "as_captured":
                # on the day it was written (the full-date lines or the dump say which)
                assert abs(entry["start_ts"] - truth[name]["start_ts"]) < DAY_S * 10**9, (variant, plan)
        assert trace["end_ts"] - trace["start_ts"] <= span + DAY_S * 10**9, variant
        assert heads(report) == heads(captured), variant
