"""Nsight Systems SQLite exports and raw Nsight reports, checked with sqlite3 directly."""
from __future__ import annotations

import re
import sqlite3

import pytest

from ingest.engine.events import ParseError
from tests.corpus import CORPUS, corpus
from tests.ingest.parsers.helpers import attrs, parse_to_frame

SQLITE_FILES = sorted((CORPUS / "public" / "nsys").glob("*.sqlite"))


def _rows(path, sql):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return con.execute(sql).fetchall()


@pytest.mark.parametrize("path", SQLITE_FILES, ids=[p.name for p in SQLITE_FILES])
def test_nsys_export_counts_ids_and_clock(path, tmp_path, corpus_dir):
    frame, report = parse_to_frame(path, tmp_path)
    assert report.format == "nsys_sqlite" and report.meta["clock"]["domain"] == "unix"
    start = _rows(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0]
    kernels = _rows(path, "SELECT start, end, globalPid, correlationId, streamId "
                          "FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start")
    got = frame[frame["kind"] == "kernel"].sort_values("ts")
    assert len(got) == len(kernels)
    for (s, e, gpid, corr, stream), ts, dur, pid, c, st in zip(
            kernels, got["ts"], got["dur"], got["pid"], got["corr"], got["stream"]):
        assert (ts, dur, pid, c, st) == (start + s, e - s, (gpid >> 24) & 0xFFFFFF, corr, stream)
    # every kernel's host thread is its launching runtime call's thread
    launch = dict(_rows(path, "SELECT correlationId, globalTid & 16777215 FROM CUPTI_ACTIVITY_KIND_RUNTIME"))
    assert all(tid == launch[c] for c, tid in zip(got["corr"], got["tid"]))
    # runtime + driver rows: one per API call (2.x exports also hold a nested _vNNNN twin)
    calls = {(c, g, re.sub(r"_v\d+$", "", n)) for c, g, n in _rows(
        path, "SELECT correlationId, globalTid, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
              "JOIN StringIds s ON s.id = r.nameId")}
    assert frame["kind"].isin(["runtime", "driver"]).sum() == len(calls)
    memcpy = _rows(path, "SELECT srcKind, dstKind FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    got_memcpy = attrs(frame[frame["kind"] == "memcpy"])
    assert len(got_memcpy) == len(memcpy)
    assert sum(a["memcpy_kind"] == "pageable" for a in got_memcpy) == \
        sum(1 for s, d in memcpy if 0 in (s, d))
    gpus = [n for (n,) in _rows(path, "SELECT name FROM TARGET_INFO_GPU")]
    assert [d["name"] for d in report.meta["devices"]] == gpus


def test_nvtx_ranges_and_syncs(tmp_path, corpus_dir):
    path = corpus("public", "nsys", "pipit_saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    ranges = _rows(path, "SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60)")[0][0]
    frame, _ = parse_to_frame(path, tmp_path)
    assert (frame["kind"] == "annotation").sum() == ranges > 0
    assert "MPI_Init" in set(frame.loc[frame["kind"] == "annotation", "name"])
    path = corpus("public", "nsys", "pipit_perlmutter-cloverleaf-cuda.sqlite")
    syncs = _rows(path, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")[0][0]
    osrt = _rows(path, "SELECT COUNT(*) FROM OSRT_API")[0][0]
    frame, _ = parse_to_frame(path, tmp_path)
    assert (frame["kind"] == "sync").sum() == syncs
    assert sum(a.get("api") == "os_runtime" for a in attrs(frame[frame["kind"] == "cpu_op"])) == osrt


def test_sqlite_that_is_not_an_nsys_export(tmp_path):
    path = tmp_path / "app.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    with pytest.raises(ParseError) as e:
        parse_to_frame(path, tmp_path)
    assert "app.sqlite" in str(e.value) and "StringIds" in str(e.value)


@pytest.mark.parametrize("path,command", [
    (corpus("public", "nsys", "jaxtoolbox_nsys_report_benchmark.nsys-rep"),
     "nsys export --type sqlite -o jaxtoolbox_nsys_report_benchmark.sqlite "
     "jaxtoolbox_nsys_report_benchmark.nsys-rep"),
    (corpus("public", "nsys", "jaxtoolbox_cuda_graph_pdl_stream_capture.nsys-rep"), "nsys export --type sqlite"),
    (corpus("public", "ncu", "jaxtoolbox_cuda_graph_pdl_stream_capture.ncu-rep"),
     "ncu --import jaxtoolbox_cuda_graph_pdl_stream_capture.ncu-rep --page raw --csv"),
], ids=["nsys-rep", "nsys-rep-graph", "ncu-rep"])
def test_raw_nsight_reports_say_how_to_export(path, command, tmp_path, corpus_dir):
    with pytest.raises(ParseError) as e:
        parse_to_frame(path, tmp_path)
    assert path.name in str(e.value) and command in str(e.value)
