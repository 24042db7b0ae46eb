"""Kineto parser against every Kineto trace of the corpus, counted independently with json."""
from __future__ import annotations

import gzip
import json
import re
from collections import Counter

import pytest

from ingest.engine.events import ParseError
from tests.corpus import CORPUS, corpus
from tests.ingest.parsers.helpers import attrs, load_json, parse_to_frame

KINETO_FILES = sorted(
    [p for p in (CORPUS / "h200").glob("*/kineto_trace.json.gz")]
    + [p for p in (CORPUS / "public" / "kineto").rglob("*.json*")])
IDS = [str(p.relative_to(CORPUS)) for p in KINETO_FILES]

CAT = {"kernel": ("kernel", "Kernel"), "runtime": ("cuda_runtime", "Runtime"),
       "driver": ("cuda_driver",), "memcpy": ("gpu_memcpy", "Memcpy"),
       "memset": ("gpu_memset", "Memset"), "sync": ("cuda_sync",)}


def _expected(events: list[dict]) -> Counter:
    """Rows per kind, counted straight from the JSON."""
    want: Counter = Counter()
    for e in events:
        if e.get("ph") in ("s", "f", "t", "M"):
            continue
        cat, name = e.get("cat"), e.get("name", "")
        nccl = name.startswith(("ncclKernel", "ncclDevKernel")) or name == "record_param_comms"
        for kind, cats in CAT.items():
            if cat in cats:
                want["collective" if kind == "kernel" and nccl else kind] += 1
        if cat in ("cpu_op", "Operator", "python_function"):
            want["collective" if name == "record_param_comms" else "cpu_op"] += 1
        if cat in ("user_annotation", "gpu_user_annotation"):
            want["annotation"] += 1
        if e.get("ph") == "i" and name == "[memory]":
            want["free" if e["args"].get("Bytes", 0) < 0 else "alloc"] += 1
        if e.get("ph") == "i" and name == "[OutOfMemory]":
            want["oom"] += 1
    return want


@pytest.mark.parametrize("path", KINETO_FILES, ids=IDS)
def test_every_kineto_trace_parses_with_independent_counts(path, tmp_path, corpus_dir):
    doc = load_json(path)
    events = doc["traceEvents"]
    frame, report = parse_to_frame(path, tmp_path)
    assert report.format == "kineto"
    got = frame["kind"].value_counts()
    for kind, n in _expected(events).items():
        assert got.get(kind, 0) == n, kind
    flows = sum(1 for e in events if e.get("ph") in ("s", "f", "t"))
    assert report.meta["flow_events"] == flows
    rows = sum(1 for e in events if e.get("ph") not in ("s", "f", "t", "M"))
    assert len(frame) == rows  # nothing dropped silently: unknowns are markers
    assert frame["ts"].min() > 0


@pytest.mark.parametrize("path", KINETO_FILES, ids=IDS)
def test_kernels_find_their_launch(path, tmp_path, corpus_dir):
    events = load_json(path)["traceEvents"]
    launches = {e["args"]["correlation"]: (e["pid"], e["tid"]) for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver", "Runtime")
                and "correlation" in e.get("args", {})}
    frame, _ = parse_to_frame(path, tmp_path)
    gpu = frame[frame["kind"].isin(["kernel", "memcpy", "memset"]) & (frame["corr"] >= 0)]
    launched = gpu[gpu["corr"].isin(list(launches))]
    for corr, pid, tid in zip(launched["corr"], launched["pid"], launched["tid"]):
        want_pid, want_tid = launches[corr]
        assert (pid, tid) == (int(want_pid), int(want_tid))
    unlaunched = gpu[~gpu["corr"].isin(list(launches))]
    assert (unlaunched["pid"] == -1).all()


def test_healthy_decode_lands_on_the_wall_clock_of_the_other_artifacts(tmp_path, corpus_dir):
    """ts = baseTimeNanoseconds + ts_us*1000 (libkineto's transToRelativeTime): every decode
    step of token_latency.jsonl starts with the model's first op within a few ms."""
    frame, report = parse_to_frame(corpus("h200", "healthy_decode", "kineto_trace.json.gz"), tmp_path)
    assert report.meta["clock"]["domain"] == "unix"
    steps = [json.loads(line) for line in
             corpus("h200", "healthy_decode", "token_latency.jsonl").read_text().splitlines() if line]
    embeddings = sorted(frame.loc[frame["name"] == "aten::embedding", "ts"])
    assert len(embeddings) >= len(steps)
    for step in steps:
        nearest = min(embeddings, key=lambda t: abs(t - step["start_ns"]))
        assert abs(nearest - step["start_ns"]) < 5_000_000, step["step"]
    otlp = json.loads(corpus("h200", "healthy_decode", "otlp_traces.json").read_text())
    spans = [s for rs in otlp["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    first = min(int(s["startTimeUnixNano"]) for s in spans)
    assert abs(embeddings[0] - first) < 5_000_000


def test_old_traces_without_base_time_are_absolute_and_synthetic_ones_relative(tmp_path, corpus_dir):
    _, old = parse_to_frame(corpus("public", "kineto", "hta_alexnet_critical_path_single_gpu.json.gz"), tmp_path)
    assert old.meta["clock"]["domain"] == "unix"
    _, synthetic = parse_to_frame(corpus("public", "kineto", "hta_large_integer_edgecase_rank70.json.gz"), tmp_path)
    assert synthetic.meta["clock"]["domain"] == "relative" and synthetic.meta["clock"]["note"]


@pytest.mark.parametrize("name,rank,world", [("hta_nccl_data_rank0_ws2.json.gz", 0, 2),
                                             ("hta_rank0_ws16_a100.json.gz", 0, 16)])
def test_ranks_and_nccl_collectives(name, rank, world, tmp_path, corpus_dir):
    path = corpus("public", "kineto", name)
    events = load_json(path)["traceEvents"]
    frame, report = parse_to_frame(path, tmp_path)
    assert (report.meta["rank"], report.meta["world_size"]) == (rank, world)
    coll = frame[frame["kind"] == "collective"]
    nccl_kernels = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel")]
    assert (coll["name"].str.startswith("ncclKernel")).sum() == len(nccl_kernels) > 0
    meta = attrs(coll)
    assert all(a["rank"] == rank for a in meta)
    with_args = [e for e in nccl_kernels if "Collective name" in e["args"]]
    by_corr = {e["args"]["correlation"]: e["args"] for e in with_args}
    for corr, a in zip(coll["corr"], meta):
        if corr in by_corr:
            want = by_corr[corr]
            assert (a["op"], a["in_nelems"], a["dtype"], a["pg_name"], a["pg_ranks"]) == (
                want["Collective name"], want["In msg nelems"], want["dtype"],
                want["Process Group Name"], want["Process Group Ranks"])


def test_param_dlrm_eight_ranks(tmp_path, corpus_dir):
    files = sorted((CORPUS / "public" / "kineto" / "param_dlrm_8rank").glob("*.json.gz"))
    assert len(files) == 8
    for path in files:
        frame, report = parse_to_frame(path, tmp_path)
        assert report.meta["rank"] == int(re.match(r"worker(\d+)", path.name).group(1))
        assert report.meta["world_size"] == 8
        ops = {a.get("op") for a in attrs(frame[frame["kind"] == "collective"])}
        assert {"sendrecv", "allreduce"} <= ops


def test_large_integer_is_kept_as_string_and_warned(tmp_path, corpus_dir):
    frame, report = parse_to_frame(corpus("public", "kineto", "hta_large_integer_edgecase_rank70.json.gz"), tmp_path)
    comms = attrs(frame[frame["name"] == "record_param_comms"])
    assert comms[0]["Comms Id"] == "10159970886766084423"
    assert any("beyond int64" in w for w in report.warnings)


def test_memcpy_kind_and_profiler_steps(tmp_path, corpus_dir):
    path = corpus("h200", "sync_stall_decode", "kineto_trace.json.gz")
    pageable = sum(1 for e in load_json(path)["traceEvents"]
                   if e.get("cat") == "gpu_memcpy" and "Pageable" in e["name"])
    frame, _ = parse_to_frame(path, tmp_path)
    kinds = Counter(a.get("memcpy_kind") for a in attrs(frame[frame["kind"] == "memcpy"]))
    assert kinds["pageable"] == pageable == 60
    path = corpus("public", "kineto", "hta_nccl_data_rank0_ws2.json.gz")
    want = sum(1 for e in load_json(path)["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))
    frame, _ = parse_to_frame(path, tmp_path)
    steps = frame[frame["name"].str.startswith("ProfilerStep#")]
    assert len(steps) == want > 0
    for name, a in zip(steps["name"], attrs(steps)):
        assert a["step"] == int(name.split("#")[1])


def test_oom_event_from_the_allocator(tmp_path, corpus_dir):
    frame, _ = parse_to_frame(corpus("h200", "oom_fragmentation", "kineto_trace.json.gz"), tmp_path)
    oom = frame[frame["kind"] == "oom"]
    assert sorted(oom["value"]) == [72_000_000, 16_000_000_000]
    assert (oom["device"] == 0).all()


# ------------------------------------------------------------------ derived inputs

def _write(tmp_path, doc, name="trace.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_begin_end_pairs_and_counters(tmp_path, corpus_dir):
    doc = load_json(corpus("h200", "cudagraph_abort", "kineto_trace.json.gz"))
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    op = ops[0]
    doc["traceEvents"].remove(op)
    begin = {k: v for k, v in op.items() if k != "dur"} | {"ph": "B"}
    end = {"ph": "E", "pid": op["pid"], "tid": op["tid"], "ts": op["ts"] + op["dur"]}
    counter = {"ph": "C", "name": "queue depth", "pid": op["pid"], "tid": 0, "ts": op["ts"],
               "args": {"depth": 3}}
    doc["traceEvents"] += [begin, end, counter]
    frame, _ = parse_to_frame(_write(tmp_path, doc), tmp_path)
    assert (frame["kind"] == "cpu_op").sum() == len(ops)
    paired = frame[(frame["name"] == op["name"]) & (frame["kind"] == "cpu_op")]
    assert round(op["dur"] * 1000) in set(paired["dur"])
    sample = frame[frame["kind"] == "sample"]
    assert list(sample["name"]) == ["queue depth"] and list(sample["value"]) == [3.0]


def test_one_broken_event_in_the_middle_is_skipped_and_counted(tmp_path, corpus_dir):
    doc = load_json(corpus("h200", "cudagraph_abort", "kineto_trace.json.gz"))
    events = doc["traceEvents"]
    rows = sum(1 for e in events if e.get("ph") not in ("s", "f", "t", "M"))
    xs = [i for i, e in enumerate(events) if e.get("ph") == "X"]
    events[xs[len(xs) // 2]]["ts"] = "not a number"
    del events[xs[len(xs) // 2 + 1]]["ts"]
    frame, report = parse_to_frame(_write(tmp_path, doc), tmp_path)
    assert len(frame) == rows - 2
    assert report.skipped["broken event"] == 1 and report.skipped["event without ts"] == 1
    assert any(f"traceEvents[{xs[len(xs) // 2]}]" in w for w in report.warnings)


def test_truncated_json_names_the_byte(tmp_path, corpus_dir):
    raw = gzip.decompress(corpus("h200", "cudagraph_abort", "kineto_trace.json.gz").read_bytes())
    path = tmp_path / "cut.pt.trace.json"
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ParseError) as e:
        parse_to_frame(path, tmp_path)
    assert "cut.pt.trace.json" in str(e.value) and f"byte {len(raw) // 2:,}" in str(e.value)


def test_truncated_gzip_names_the_offset(tmp_path, corpus_dir):
    raw = corpus("h200", "healthy_decode", "kineto_trace.json.gz").read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ParseError) as e:
        parse_to_frame(path, tmp_path)
    assert "cut.json.gz" in str(e.value) and "decompressed byte" in str(e.value)
    assert "truncated" in str(e.value)


@pytest.mark.parametrize("at", [12, 1_000, 200_000, 700_000])
def test_corrupt_gzip_data_is_bad_input_not_a_crash(tmp_path, corpus_dir, at):
    """Bytes changed inside the deflate data, in the head that detection reads or further on:
    whichever error the gzip reader raises (zlib's or zlib-ng's "invalid code lengths set", a
    CRC mismatch, an early end) or the JSON that comes out of it, the file is named as unusable."""
    raw = bytearray(corpus("h200", "healthy_decode", "kineto_trace.json.gz").read_bytes())
    raw[at:at + 64] = bytes(b ^ 0x5A for b in raw[at:at + 64])
    path = tmp_path / "damaged.json.gz"
    path.write_bytes(bytes(raw))
    with pytest.raises(ParseError) as e:
        parse_to_frame(path, tmp_path)
    assert "damaged.json.gz" in str(e.value) and "tracedoc bug" not in str(e.value)


# ------------------------------------------------------------------ streaming windows

@pytest.fixture
def small_windows(monkeypatch):
    """Windows of a few KiB: events, cuts and launches fall across many windows."""
    from ingest.engine.parsers.kineto import decode as kineto_decode
    monkeypatch.setattr(kineto_decode, "WINDOW_BYTES", 4096)


@pytest.mark.parametrize("name", ["sync_stall_decode", "cudagraph_abort"])
def test_small_windows_give_the_same_rows_and_launches(name, tmp_path, corpus_dir, small_windows):
    path = corpus("h200", name, "kineto_trace.json.gz")
    events = load_json(path)["traceEvents"]
    frame, report = parse_to_frame(path, tmp_path)
    assert report.meta["trace_events"] == len(events)
    assert len(frame) == sum(1 for e in events if e.get("ph") not in ("s", "f", "t", "M"))
    got = frame["kind"].value_counts()
    for kind, n in _expected(events).items():
        assert got.get(kind, 0) == n, kind
    launches = {e["args"]["correlation"]: (e["pid"], e["tid"]) for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    gpu = frame[frame["kind"].isin(["kernel", "memcpy", "memset"]) & frame["corr"].isin(list(launches))]
    assert len(gpu) > 0
    assert list(zip(gpu["pid"], gpu["tid"])) == [launches[c] for c in gpu["corr"]]


@pytest.mark.parametrize("name", ["sync_stall_decode", "cudagraph_abort"])
def test_window_buffers_taken_again_give_the_same_table(name, tmp_path, corpus_dir, small_windows, monkeypatch):
    """A window read into a buffer an earlier window used (ingest.engine.spare_buffers) gives the
    rows a fresh buffer gives: none of the earlier window's bytes leak into them."""
    from ingest.engine.parsers.kineto import decode as kineto_decode
    from ingest.engine.spare_buffers import SpareBuffers
    pools: list[SpareBuffers] = []

    class Counted(SpareBuffers):
        def __init__(self, *args):
            super().__init__(*args)
            pools.append(self)

    monkeypatch.setattr(kineto_decode, "SpareBuffers", Counted)
    path = corpus("h200", name, "kineto_trace.json.gz")
    (tmp_path / "reused").mkdir()
    (tmp_path / "fresh").mkdir()
    reused, _ = parse_to_frame(path, tmp_path / "reused")
    assert sum(p.reused for p in pools) >= 5
    monkeypatch.setattr(kineto_decode, "SPARE_WINDOWS", 0)
    fresh, _ = parse_to_frame(path, tmp_path / "fresh")
    assert reused.astype(str).equals(fresh.astype(str))


def test_stale_bytes_past_a_reused_window_are_no_cut():
    """A reused buffer holds an older window's bytes past the new window's end: a `}` that
    ends the window must not become a cut because `,{` follows it there."""
    from ingest.engine.parsers.kineto.decode import _last_cuts
    content = b'[{"a": 1}, {"b": 2}'
    buf = bytearray(content + b', {"stale": 0}]')
    window = memoryview(buf)[:len(content)]
    first_end = content.index(b"}")  # the only true cut: after the first event
    assert _last_cuts(window, len(content) - 1, eof=False) == [first_end]
    assert _last_cuts(bytearray(content), len(content) - 1, eof=False) == [first_end]


def test_cut_lookalikes_inside_strings_are_not_boundaries(tmp_path, corpus_dir, small_windows):
    doc = load_json(corpus("h200", "cudagraph_abort", "kineto_trace.json.gz"))
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    for e in ops:
        e["name"] = e["name"] + ' },{"ph": "X"}, {'
    frame, _ = parse_to_frame(_write(tmp_path, doc), tmp_path)
    got = frame.loc[frame["kind"] == "cpu_op", "name"]
    assert sorted(got) == sorted(e["name"] for e in ops)


def test_base_time_after_trace_events_is_applied_from_the_first_event(tmp_path, corpus_dir):
    path = corpus("public", "kineto", "hta_nccl_data_rank0_ws2.json.gz")
    raw = gzip.decompress(path.read_bytes())
    assert raw.rfind(b'"baseTimeNanoseconds"') > raw.rfind(b'"traceEvents"')  # written last
    doc = json.loads(raw)
    frame, report = parse_to_frame(path, tmp_path)
    assert report.meta["clock"]["source"] == "baseTimeNanoseconds + ts"
    first = min(e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X")
    assert frame["ts"].min() == doc["baseTimeNanoseconds"] + round(first * 1000)


def test_a_gzip_is_read_once_when_its_header_has_the_clock_base(tmp_path, corpus_dir, monkeypatch):
    """Reading the keys after traceEvents ahead means decompressing a gzip twice: skipped when
    the header already gives what the rows need; the rows are the same."""
    from ingest.engine.parsers.kineto import trace as kineto
    path = corpus("h200", "healthy_decode", "kineto_trace.json.gz")
    assert b'"baseTimeNanoseconds"' in gzip.decompress(path.read_bytes())[:4096]
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    want, _ = parse_to_frame(path, tmp_path / "a")
    monkeypatch.setattr(kineto, "peek_trailer", lambda p: pytest.fail("read the gzip ahead"))
    got, report = parse_to_frame(path, tmp_path / "b")
    assert got["ts"].tolist() == want["ts"].tolist()
    assert not any("read ahead" in w for w in report.warnings)


def test_malformed_json_mid_trace_names_its_byte(tmp_path, corpus_dir, small_windows):
    raw = gzip.decompress(corpus("h200", "sync_stall_decode", "kineto_trace.json.gz").read_bytes())
    at = raw.index(b'"ph": "X"', len(raw) // 2)
    path = tmp_path / "bad.pt.trace.json"
    path.write_bytes(raw[:at] + b"#" + raw[at + 1:])
    with pytest.raises(ParseError) as e:
        parse_to_frame(path, tmp_path)
    assert "bad.pt.trace.json" in str(e.value) and f"byte {at:,}" in str(e.value)


def test_keys_after_trace_events_past_the_read_ahead_are_reported(tmp_path, corpus_dir, monkeypatch):
    from ingest.engine.parsers.kineto import decode as kineto_decode
    monkeypatch.setattr(kineto_decode, "TAIL_BYTES", 16)  # too short to reach the array's end
    path = corpus("public", "kineto", "hta_triton_example.json.gz")
    doc = load_json(path)
    _, report = parse_to_frame(path, tmp_path)
    assert report.meta["base_time_ns"] == doc["baseTimeNanoseconds"]
    assert any("could not be read ahead" in w for w in report.warnings)


# ------------------------------------------------------------------ integers beyond 64 bits

def test_integers_beyond_64_bits_keep_their_digits_in_rewritten_attrs(tmp_path, corpus_dir):
    """A step's attrs are rewritten (the step number added): an integer beyond 64 bits in them
    stays a string of its digits (orjson alone would have read it as a float)."""
    doc = load_json(corpus("h200", "cudagraph_abort", "kineto_trace.json.gz"))
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 1, "tid": 1,
            "ts": doc["traceEvents"][-1].get("ts", 1.0), "dur": 1.0,
            "args": {"huge": 123456789012345678901234, "neg": -9223372036854775809, "ok": 5}}
    doc["traceEvents"].append(step)
    frame, report = parse_to_frame(_write(tmp_path, doc), tmp_path)
    got = attrs(frame[frame["name"] == "ProfilerStep#7"])
    assert got == [{"huge": "123456789012345678901234", "neg": "-9223372036854775809", "ok": 5, "step": 7}]
    assert any("2 integer(s) beyond int64" in w for w in report.warnings)


def test_long_digit_runs_flag_every_row_with_an_integer_beyond_int64():
    """The vectorized prefilter may flag too many rows, never too few (has_big_int decides)."""
    import random

    import numpy as np

    from ingest.engine.parsers.kineto.decode import has_big_int
    from ingest.engine.parsers.kineto.trace import _long_digit_runs
    rng = random.Random(16)

    def piece() -> str:
        r = rng.random()
        if r < 0.2:
            return str(rng.randint(0, 10 ** rng.randint(1, 30)))
        if r < 0.4:
            return f"{rng.randint(0, 99)}.{rng.randint(0, 10 ** rng.randint(1, 30))}"
        if r < 0.5:
            return "-" + str(rng.randint(10**18, 10**25))
        if r < 0.6:
            return f"{rng.randint(10**18, 10**22)}e{rng.randint(1, 9)}"
        return rng.choice(['{"a":', "}", ",", '"x"', "[", "]", ".", " ", "e"])

    for _ in range(500):
        raws = ["".join(piece() for _ in range(rng.randint(0, 8))).encode() for _ in range(rng.randint(1, 12))]
        offsets = np.zeros(len(raws) + 1, np.int64)
        np.cumsum([len(r) for r in raws], out=offsets[1:])
        flagged = set(_long_digit_runs(b"".join(raws), offsets).tolist())
        assert {i for i, r in enumerate(raws) if has_big_int(r)} <= flagged
