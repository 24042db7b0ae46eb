"""Stamps without a year take the year the upload's evidence gives, never one that merely fits
a range; what no evidence places stays as read, flagged (ingest.engine.align, ingest.engine.clock_evidence)."""
from __future__ import annotations

import datetime as dt
import gzip
import json
import os

import pyarrow as pa

from ingest.engine.align import plan_alignment
from ingest.engine.events import make_batch
from ingest.engine.parsers.logs.year import year_hint

S = 10**9
DAY = 86_400 * S
DUMP_T = int(dt.datetime(2026, 12, 1, 0, 40, 23, tzinfo=dt.timezone.utc).timestamp()) * S


def _table(ts, **columns) -> pa.Table:
    return pa.Table.from_batches([make_batch({"ts": list(ts), **columns})])


def _yearless(year: int, source: str = "the file's modification time") -> dict:
    return {"clock": {"domain": "unix", "year_assumed": year, "year_source": source}}


def _in_year(ns: int, year: int) -> int:
    t = dt.datetime.fromtimestamp(ns // S, dt.timezone.utc)
    return int(t.replace(year=year).timestamp()) * S + ns % S


EXACT = {"clock": {"domain": "unix"}}


def test_a_placeholder_time_in_a_dump_does_not_stretch_the_trace_over_decades():
    # a dump row with no time (0) and one garbled into 2082: neither is a date
    dump = _table([0, DUMP_T, DUMP_T + 5 * S, _in_year(DUMP_T, 2082)])
    log = _table([_in_year(DUMP_T, 1970) + 2 * S])  # year from a modification time of 0
    plans = plan_alignment({"nccl_trace_rank_0": dump, "rank1.log": log},
                           {"nccl_trace_rank_0": EXACT, "rank1.log": _yearless(1970)})
    placed = plans["rank1.log"]
    assert placed.aligned and _in_year(DUMP_T, 1970) + 2 * S + placed.offset_ns == DUMP_T + 2 * S
    assert placed.evidence == "nccl_trace_rank_0's full wall-clock times"
    assert plans["nccl_trace_rank_0"].offset_ns == 0


def test_a_log_no_year_places_within_a_day_of_the_others_stays_as_read_with_a_warning():
    log_t = _in_year(DUMP_T, 2026) - 40 * DAY  # another day than the dump's, in any year
    plans = plan_alignment({"dump": _table([DUMP_T]), "old.log": _table([log_t])},
                           {"dump": EXACT, "old.log": _yearless(2026)})
    plan = plans["old.log"]
    assert not plan.aligned and plan.offset_ns == 0
    assert "40 days away" in plan.warning and "old.log" in plan.warning


def test_without_full_dates_year_less_logs_agree_on_the_year_most_were_given():
    t = _in_year(DUMP_T, 2026)
    tables = {"rank0.log": _table([t]), "rank1.log": _table([_in_year(t, 1970) + S]),
              "rank2.log": _table([t + 2 * S])}
    metas = {"rank0.log": _yearless(2026), "rank1.log": _yearless(1970), "rank2.log": _yearless(2026)}
    plans = plan_alignment(tables, metas)
    assert plans["rank0.log"].offset_ns == plans["rank2.log"].offset_ns == 0
    moved = plans["rank1.log"]
    assert moved.aligned and _in_year(t, 1970) + S + moved.offset_ns == t + S
    assert "rank0.log's year (the file's modification time)" in moved.evidence or "rank2.log" in moved.evidence


def test_the_same_collective_in_a_dump_places_the_watchdog_log():
    created = DUMP_T
    dump = _table([created - 2 * 60 * S, created], kind=pa.array(["collective", "collective"]),
                  attrs=[json.dumps({"collective_seq_id": 5, "pg_id": 0, "rank": 0}),
                         json.dumps({"collective_seq_id": 6, "pg_id": 0, "rank": 0})])
    line = _in_year(created, 2027) + 10_002 * 10**6  # the watchdog fires `elapsed` after the enqueue
    log = _table([line - 30 * S, line], name=pa.array(["log", "NCCLWatchdogTimeout"]),
                 attrs=["{}", json.dumps({"seq": 6, "pg_id": 0, "rank": 0, "op": "ALLREDUCE", "elapsed_ms": 10_002})])
    plans = plan_alignment({"nccl_trace_rank_0": dump, "rank0.log": log},
                           {"nccl_trace_rank_0": {"clock": {"domain": "unix"}, "pg_config": {}},
                            "rank0.log": _yearless(2027)})
    plan = plans["rank0.log"]
    assert plan.aligned and line + plan.offset_ns - (created + 10_002 * 10**6) == 0
    assert plan.evidence.startswith("ALLREDUCE seq 6 in nccl_trace_rank_0")


def test_year_hint_prefers_the_files_own_dates_then_a_plausible_modification_time(tmp_path):
    dated = tmp_path / "rank1.log.gz"
    with gzip.open(dated, "wt") as f:
        f.write("[I1201 00:40:23.260472796 ProcessGroupNCCL.cpp:1725] init\n")
        f.write("2025-12-01 00:40:23 rank 1: step 0 done\n")
    os.utime(dated, (0, 0))
    assert year_hint(dated) == type(year_hint(dated))(2025, "the file's own full-date line 2")

    bare = tmp_path / "rank0.log"
    bare.write_text("[E1201 00:40:33.884487597 ProcessGroupNCCL.cpp:689] timeout\n")
    when = dt.datetime(2024, 6, 1, tzinfo=dt.timezone.utc).timestamp()
    os.utime(bare, (when, when))
    assert (year_hint(bare).year, year_hint(bare).source) == (2024, "the file's modification time")
    os.utime(bare, (0, 0))
    now = dt.datetime(2026, 12, 6, tzinfo=dt.timezone.utc)
    hint = year_hint(bare, now=now)
    assert hint.year == 2026 and "1970-01-01" in hint.source


def test_year_hint_reads_the_gzip_header_before_the_files_own_time(tmp_path):
    log = tmp_path / "rank0.log.gz"
    kept = dt.datetime(2025, 3, 1, tzinfo=dt.timezone.utc).timestamp()
    with open(log, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=int(kept)) as f:
        f.write(b"[E0301 00:40:33.884487597 ProcessGroupNCCL.cpp:689] timeout\n")
    os.utime(log, (0, 0))  # a copy that lost the file's time
    assert year_hint(log) == type(year_hint(log))(2025, "the modification time its gzip header keeps")
