"""The line prefilter (logs.prefilter) skips work and nothing else, and no hostile line can make
a text parser's regexes quadratic.

The prefilter is a set of necessary conditions: a family's words must cover every line its
patterns can match. Checked here family by family over every line of the real logs we hold,
and end to end (the same events with the prefilter on and off).
"""
from __future__ import annotations

import gzip
import time
from pathlib import Path

import pytest

from ingest.engine.events import EventSink, ParseError, ParseReport
from ingest.engine.parsers.dcgm import exporter as dcgm
from ingest.engine.parsers.logs import lines as log_lines
from ingest.engine.parsers.logs import parser as log
from ingest.engine.parsers.logs.prefilter import KeywordGate, Needs
from ingest.engine.parsers.logs.prefix import split_line
from tests.ingest.parsers.helpers import parse_with

ROOT = Path(__file__).resolve().parents[3]
LOG_DIRS = (ROOT.parent / "shared" / "corpus" / "public" / "logs", ROOT / "tests" / "fixtures" / "open_world")


def _log_files() -> list[Path]:
    return sorted(p for d in LOG_DIRS if d.is_dir() for p in d.rglob("*.log"))


def _bodies() -> list[str]:
    """Each line of the real logs as written and without its envelope (what classify sees)."""
    out: set[str] = set()
    for path in _log_files():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            out.add(line)
            out.add(split_line(line, 2025).body)
    return sorted(out)


@pytest.fixture(scope="module")
def bodies() -> list[str]:
    found = _bodies()
    if len(found) < 1000:
        pytest.skip("the shared log corpus is not here")
    return found


def test_every_family_that_matches_a_real_line_is_a_candidate(bodies):
    missed = []
    for body in bodies:
        mask = log_lines._GATE.candidates(body)
        for bit, check in log_lines._CHECKS:
            if not mask & bit and check(body):
                missed.append((check.__name__, body[:120]))
    assert not missed, missed[:10]


def test_classify_is_the_same_with_the_prefilter_off(bodies):
    on = [log_lines.classify(b) for b in bodies]
    with log_lines.prefilter_disabled():
        off = [log_lines.classify(b) for b in bodies]
    assert sum(f is not None for f in off) > 500  # the corpus exercises the classifiers
    assert [repr(f) for f in on] == [repr(f) for f in off]


def test_most_lines_run_few_families(bodies):
    tried = sum(bin(log_lines._GATE.candidates(b)).count("1") for b in bodies)
    assert tried / len(bodies) < 3, tried / len(bodies)  # of 18 families


@pytest.mark.parametrize("name", ["nccl_watchdog_timeout_nccl_1610_alltoall_socket.log",
                                  "cuda_oom_pytorch_16417_torch22.log", "nccl_tests_allreduce_8xa100_superbench.log",
                                  "vllm_kv_cache_no_memory_36861.log"])
def test_parse_gives_the_same_events_with_the_prefilter_off(name):
    path = LOG_DIRS[0] / name
    if not path.exists():
        pytest.skip("the shared log corpus is not here")
    on, _ = parse_with(log, path, year=2025)
    with log_lines.prefilter_disabled():
        off, _ = parse_with(log, path, year=2025)
    assert len(on) >= 1 and (on["kind"] != "log").any()
    assert on.drop(columns=["a"]).equals(off.drop(columns=["a"]))


def test_gate_reports_every_word_present_case_insensitively_and_the_openers():
    gate = KeywordGate([Needs(("nccl",)), Needs(("nccl error",)), None, Needs(("zzz",), starts="|"),
                        Needs(("qqq",), starts_after_space=":"), Needs(("www",), first_space=True)])
    assert gate.candidates("x NCCL Error y") == 0b000111   # overlapping words both reported
    assert gate.candidates("| a |") == 0b001100
    assert gate.candidates("   : 10 GiB") == 0b110100
    assert gate.candidates("nothing here") == 0b000100     # a family without needs always runs
    assert gate.candidates("\ud800 nccl") == gate.everything  # text RE2 cannot take: skip nothing


# --- hostile lines ------------------------------------------------------------------------------
N = 65_000
_WORDS = "".join(log_lines._GATE.words)
HOSTILE = {  # issue 11: 20 lines of 65,000 "a" then "!" (1,348 bytes gzipped) cost 111 s of worker time
    "a_then_bang": "a" * N + "!",
    "letters_and_digits": ("a1" * N)[:N] + "!",        # the pdsh host prefix backtracked over these
    "digits": "1" * N,                                   # unbounded "\d+" searches (OOM sizes)
    "digits_after_oom_words": "CUDA out of memory. Tried to allocate " + "1" * N,
    "every_prefilter_word": (_WORDS * (N // len(_WORDS) + 1))[:N],
    "spaces": " " * N + "!",
    "megatron_cells": "iteration 1/ 2 |" + (" a:" * N)[:N],
    "dcgm_label": "DCGM_FI_DEV_GPU_UTIL{" + "a" * N + "} 1",
    "dcgm_config": " " * N + "x",
}
TEXT_PARSERS = ("logs.parser", "dcgm.exporter", "nvidia_smi.query_csv", "nvidia_smi.dmon", "nvidia_smi.pmon",
                "nvidia_smi.q", "ncu.csv_export", "perf.script", "perf.trace", "perf.bpftrace")


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hostile")
    files = {}
    for name, line in HOSTILE.items():
        path = root / f"{name}.log.gz"
        path.write_bytes(gzip.compress((line + "\n").encode() * 20))
        files[name] = path
    return files


@pytest.mark.parametrize("parser", TEXT_PARSERS)
def test_hostile_lines_cost_seconds_not_minutes(parser, hostile_files):
    """Each file is 20 lines of 65 KB; a quadratic pattern spends minutes on one (111 s before).
    The bound is generous for a loaded machine; the linear cost is well under a second."""
    import importlib
    module = importlib.import_module(f"ingest.engine.parsers.{parser}")
    slow = {}
    for name, path in hostile_files.items():
        sink, report = EventSink("hostile", module.SOURCE, lambda batch: None), ParseReport(format=module.FORMAT)
        start = time.perf_counter()
        try:
            kwargs = {"year": 2025} if module is log else {}
            module.parse(path, sink, report, **kwargs)
            sink.flush()
        except ParseError:
            pass  # refusing the file is fine; taking minutes is not
        spent = time.perf_counter() - start
        if spent > 10:
            slow[name] = round(spent, 1)
    assert not slow, slow


def test_long_lines_are_cut_with_a_warning(tmp_path):
    path = tmp_path / "long.log.gz"
    path.write_bytes(gzip.compress(("a" * (log.MAX_LINE_CHARS + 5000) + "!\n").encode() * 3))
    df, report = parse_with(log, path, year=2025)
    assert len(df) == 3 and all(len(a["text"]) == log.MAX_LINE_CHARS for a in df["a"])
    assert any("cut to" in w for w in report.warnings)


def test_dcgm_labels_read_as_before():
    labels = dict(dcgm._LABEL.findall('gpu="0",UUID="GPU-1",modelName="NVIDIA H200", Hostname = "h\\"1"'))
    assert labels == {"gpu": "0", "UUID": "GPU-1", "modelName": "NVIDIA H200", "Hostname": 'h\\"1'}
    assert dcgm._CONFIG.match("# DCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).")["field"] == \
        "DCGM_FI_DEV_SM_CLOCK"
