"""A big uncompressed Kineto trace parsed in byte ranges and merged (ingest.engine.kineto_ranges)
gives the rows of one parse of the whole file: every column, the same order, the same
report; and the cases the merge cannot put right fall back to the whole parse."""
from __future__ import annotations

import gzip
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bench.bench_kineto_parse import build_trace
from ingest.engine import kineto_ranges as kr
from ingest.engine.events import SCHEMA
from ingest.engine.parse import parse_to_table
from ingest.engine.parsers.kineto import decode
from tests.corpus import CORPUS, corpus

TRACES = sorted(p.parent.name for p in (CORPUS / "h200").glob("*/kineto_trace.json.gz"))
SMALL_WINDOW = 16 << 10


@pytest.fixture
def small_windows(monkeypatch):
    """Reader windows of 16 KiB (for the whole parse and the ranges alike): the corpus traces
    are a few windows of 8 MiB at most."""
    monkeypatch.setattr(decode, "WINDOW_BYTES", SMALL_WINDOW)
    monkeypatch.setattr(decode, "CUT_SPAN", 2 << 10)


def plain(table: pa.Table) -> pa.Table:
    """Dictionary columns decoded, NaN made comparable."""
    cols = {}
    for name in table.column_names:
        c = table.column(name)
        if pa.types.is_dictionary(c.type):
            c = pc.cast(c, c.type.value_type)
        if pa.types.is_floating(c.type):
            c = pc.if_else(pc.is_nan(c), -12345.0, c)
        cols[name] = c
    return pa.table(cols)


def in_ranges(path: Path, part_bytes: int, tmp: Path):
    ranges = kr.plan_ranges(path, part_bytes)
    tables, outcomes = [], []
    for rng in ranges:
        batches: list = []
        outcomes.append(kr.parse_range(path, rng, path.name, batches.append, tmp))
        tables.append(pa.Table.from_batches(batches, schema=SCHEMA))
    merged: list = []
    report, why = None, "not split"
    if ranges:
        try:
            report, why = kr.merge(lambda k, cols: tables[k].select(cols) if cols else tables[k],
                                   outcomes, merged.append), ""
        except kr.Unmergeable as e:
            why = str(e)
    table = pa.Table.from_batches(merged, schema=SCHEMA) if report else None
    return ranges, tables, outcomes, report, why, table


def launched_earlier(tables, outcomes) -> int:
    """Waiting rows of a range whose launch is in an earlier range (put back by the merge)."""
    launches = kr.Launches.of(tables)
    n = 0
    for k, (t, o) in enumerate(zip(tables, outcomes)):
        corr = t.column("corr").to_numpy()[o.waiting_from:]
        pos, found = launches.find(corr)
        n += int((found & (launches.range[pos] < k)).sum())
    return n


def assert_same_as_whole(path: Path, part_bytes: int, tmp: Path) -> tuple[int, int]:
    whole_report, whole = parse_to_table(path, path.name, path.name)
    ranges, tables, outcomes, report, why, table = in_ranges(path, part_bytes, tmp)
    assert len(ranges) >= 2
    assert why == ""
    assert plain(table).equals(plain(whole))
    meta = {k: v for k, v in report.meta.items() if k != "parse_seconds"}
    assert meta == json.loads(json.dumps({k: v for k, v in whole_report.meta.items() if k != "parse_seconds"}))
    assert report.summary_warnings() == whole_report.summary_warnings()
    assert report.events == whole_report.events == whole.num_rows
    return len(ranges), launched_earlier(tables, outcomes)


def decompressed(name: str, tmp: Path) -> Path:
    out = tmp / f"{name}.json"
    with gzip.open(corpus("h200", name, "kineto_trace.json.gz")) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


@pytest.mark.parametrize("part_bytes", [16 << 10, 64 << 10, 1 << 20], ids=["16KiB", "64KiB", "1MiB"])
@pytest.mark.parametrize("name", TRACES)
def test_a_corpus_trace_in_ranges_gives_the_whole_parse(name, part_bytes, small_windows, tmp_path, corpus_dir):
    path = decompressed(name, tmp_path)
    if path.stat().st_size < max(2 * part_bytes, decode.TAIL_BYTES):
        # (under TAIL_BYTES the end the reader reads ahead holds the header: not split)
        assert len(kr.plan_ranges(path, part_bytes)) in (0, 2)
        pytest.skip("too small for two ranges of this size")
    assert_same_as_whole(path, part_bytes, tmp_path)


def launches_and_kernels(n: int) -> list[dict]:
    """Runtime launches, then their kernels far later in the file (another range), and a few
    kernels before their launch (they wait to the end of the file in the whole parse)."""
    launches = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 70 + i % 3,
                 "ts": 1000.0 + i, "dur": 0.5, "args": {"correlation": i, "External id": i}} for i in range(n)]
    kernels = [{"ph": "X", "cat": "kernel", "name": f"k{i % 5}", "pid": 0, "tid": 7, "ts": 1000.2 + i, "dur": 0.5,
                "args": {"correlation": i, "device": 0, "stream": 7}} for i in range(n)]
    early = kernels[-50:]
    return early + cpu_ops(500) + launches + cpu_ops(500, 500) + kernels[:-50] + [
        dict(kernels[0], args={"correlation": 10 ** 6, "device": 0, "stream": 7})]  # never launched


def test_ranges_put_back_rows_launched_in_an_earlier_range(small_windows, tmp_path):
    path = events_doc(tmp_path / "launches.json", launches_and_kernels(3000))
    parts, moved = assert_same_as_whole(path, 16 << 10, tmp_path)
    assert parts > 10 and moved > 2000  # the merge's reordering is exercised


def test_a_tiled_trace_in_ranges_gives_the_whole_parse(small_windows, tmp_path, corpus_dir):
    path = tmp_path / "tiled.pt.trace.json"
    build_trace(path, 5)
    for part_bytes in (64 << 10, 1 << 20):
        assert_same_as_whole(path, part_bytes, tmp_path)


def test_reader_windows_of_8_mib(tmp_path, corpus_dir):
    """The reader's own window size: a trace of a few windows, a range per window or two."""
    path = tmp_path / "tiled.pt.trace.json"
    size = build_trace(path, 20)
    parts, _ = assert_same_as_whole(path, 1 << 20, tmp_path)
    assert parts == -(-size // decode.WINDOW_BYTES)  # a range per window
    parts, _ = assert_same_as_whole(path, 12 << 20, tmp_path)
    assert 2 <= parts < -(-size // decode.WINDOW_BYTES)


def events_doc(path: Path, events: list[dict], **top) -> Path:
    path.write_bytes(json.dumps({"schemaVersion": 1, **top, "traceEvents": events,
                                 "deviceProperties": [{"id": 0}, {"id": 1}]}).encode())
    return path


def cpu_ops(n: int, start: int = 0) -> list[dict]:
    return [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": 1000.0 + i,
             "dur": 0.5, "args": {"External id": i}} for i in range(start, start + n)]


def test_a_planned_cut_inside_a_string_falls_back(small_windows, tmp_path):
    """Events whose args hold `}, {`: most windows end in such a string, whose candidate the
    reader rejects (it cuts at the one before); a range planned to end there does not decode."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 1000.0 + i, "dur": 1.0,
               "args": {"note": "}, {" + "x" * 1000}} for i in range(300)]
    path = events_doc(tmp_path / "string.json", events)
    ranges, _, outcomes, report, why, _ = in_ranges(path, 16 << 10, tmp_path)
    assert len(ranges) >= 3 and report is None
    assert "failed" in why
    assert any(o.error for o in outcomes)


def test_no_cut_after_a_window_without_a_candidate_in_its_last_span(small_windows, tmp_path):
    """An event longer than a window: the reader's cuts after it would depend on where its
    window starts, so the rest of the file is the last range."""
    long = {"ph": "X", "cat": "cpu_op", "name": "long", "pid": 1, "tid": 1, "ts": 999.0, "dur": 1.0,
            "args": {"note": "x" * (3 * SMALL_WINDOW)}}
    path = events_doc(tmp_path / "long.json", cpu_ops(2000) + [long] + cpu_ops(2000, 2000))
    ranges = kr.plan_ranges(path, 4 << 10)
    assert len(ranges) >= 3
    assert ranges[-1].start < path.read_bytes().index(b'"name": "long"')
    assert_same_as_whole(path, 4 << 10, tmp_path)


def test_a_begin_end_pair_across_a_cut_falls_back(small_windows, tmp_path):
    begin = {"ph": "B", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 999.0}
    end = {"ph": "E", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 9999.0}
    path = events_doc(tmp_path / "be.json", [begin] + cpu_ops(4000) + [end])
    ranges, _, _, report, why, _ = in_ranges(path, 16 << 10, tmp_path)
    assert len(ranges) >= 2 and report is None
    assert "B event(s) without a matching E" in why


def test_begin_end_pairs_within_a_range_are_merged(small_windows, tmp_path):
    """B/E rows come after their window's others: a range keeps that order."""
    pair = [{"ph": "B", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 2, "ts": 1500.0},
            *cpu_ops(3, 10_000),
            {"ph": "E", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 2, "ts": 1600.0}]
    for before in range(1500, 1600, 7):  # a layout whose cuts leave the pair in one range
        path = events_doc(tmp_path / "pair.json", cpu_ops(before) + pair + cpu_ops(1500, before),
                          baseTimeNanoseconds=1_700_000_000_000_000_000)
        data = path.read_bytes()
        b, e = data.index(b'"ph": "B"'), data.index(b'"ph": "E"')
        if not any(b < r.start <= e for r in kr.plan_ranges(path, 16 << 10)):
            break
    assert_same_as_whole(path, 16 << 10, tmp_path)


def test_gzip_and_one_window_files_are_not_split(small_windows, tmp_path, corpus_dir):
    assert kr.plan_ranges(corpus("h200", "healthy_decode", "kineto_trace.json.gz"), 16 << 10) == []
    path = events_doc(tmp_path / "small.json", cpu_ops(100))
    assert path.stat().st_size < SMALL_WINDOW
    assert kr.plan_ranges(path, 1 << 10) == []


def test_a_range_outcome_crosses_json(small_windows, tmp_path, corpus_dir):
    path = decompressed("launch_bound_decode", tmp_path)
    rng = kr.plan_ranges(path, 1 << 20)[1]
    o = kr.parse_range(path, rng, path.name, lambda b: None, tmp_path)
    assert kr.RangeOutcome.from_json(o.to_json()) == o
    assert o.trace_events > 0 and np.isfinite(o.seconds)


def random_event(rng: random.Random, i: int, counters: bool, ranges: bool) -> dict:
    """Launches (unique correlation ids), GPU rows launched before, after or never, memory
    instants, flows, metadata, odd pids and categories, big ints; C and B/E when asked."""
    r = rng.random()
    if r < 0.3:
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": rng.choice([1, 2, "x"]),
                "tid": rng.randrange(3), "ts": 1000.0 + i, "dur": 1, "args": {"correlation": i}}
    if r < 0.6:
        return {"ph": "X", "cat": rng.choice(["kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"]),
                "name": rng.choice(["k", "ncclKernel_AllReduce", "Memcpy HtoD"]), "pid": 0, "tid": 7,
                "ts": 1000.0 + i + rng.random(), "dur": 2,
                "args": {"correlation": rng.randrange(3100), "device": rng.choice([0, 1, None]), "stream": 7}}
    if r < 0.7:
        return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1000.0 + i,
                "args": {"Bytes": rng.choice([-100, 100]), "Device Type": 1, "Device Id": 0}}
    if r < 0.75:
        return {"ph": rng.choice(["s", "f"]), "cat": "ac2g", "id": i, "pid": 1, "tid": 1, "ts": 1000.0 + i}
    if r < 0.78:
        return {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}
    if r < 0.8 and counters:
        return {"ph": "C", "name": "mem", "pid": 1, "ts": 1000.0 + i, "args": {"a": 1, "b": 2}}
    if r < 0.81 and ranges:
        return {"ph": rng.choice(["B", "E"]), "cat": "user_annotation", "name": "r", "pid": 1, "tid": 9,
                "ts": 1000.0 + i}
    return {"ph": "X", "cat": rng.choice(["cpu_op", "python_function", "weird"]), "name": f"op{i % 7}", "pid": 1,
            "tid": 1, "ts": 1000.0 + i, "dur": 0.5, "args": {"External id": i, "big": 2**70 if rng.random() < 0.01 else 1}}


@pytest.mark.parametrize("seed", range(40))
def test_random_traces_in_ranges_give_the_whole_parse_or_fall_back(seed, small_windows, tmp_path):
    rng = random.Random(seed)
    counters, ranges = rng.random() < 0.2, rng.random() < 0.1
    events = [random_event(rng, i, counters, ranges) for i in range(rng.randrange(300, 3000))]
    if rng.random() < 0.3:
        rng.shuffle(events)
    top = {"baseTimeNanoseconds": 1_700_000_000_000_000_000} if rng.random() < 0.5 else {}
    path = events_doc(tmp_path / "random.json", events, **top)
    whole_report, whole = parse_to_table(path, path.name, path.name)
    planned, _, _, report, why, table = in_ranges(path, rng.choice([4 << 10, 16 << 10, 50 << 10]), tmp_path)
    if why:  # the service parses the whole file then
        assert why == "not split" or len(planned) >= 2
        return
    assert plain(table).equals(plain(whole))
    assert {k: v for k, v in report.meta.items() if k != "parse_seconds"} == \
        json.loads(json.dumps({k: v for k, v in whole_report.meta.items() if k != "parse_seconds"}))
    assert report.summary_warnings() == whole_report.summary_warnings()
