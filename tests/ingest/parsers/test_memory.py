import json

import pytest

from ingest.engine.io import read_head
from ingest.engine.parsers.pytorch import memory_snapshot, memory_stats
from ingest.engine.safe_pickle import load_path
from tests.corpus import corpus
from tests.ingest.parsers.helpers import parse_with

GiB, MiB = 2**30, 2**20
SNAPS = {"cap": ("h200", "oom_fragmentation"), "frag": ("h200", "oom_true_fragmentation")}


def _independent(snapshot: dict) -> dict:
    """Walk the unpickled dict the plain way: the figures the OOM rules compare."""
    reserved = sum(s["total_size"] for s in snapshot["segments"])
    allocated = sum(s["allocated_size"] for s in snapshot["segments"])  # the allocator's own count
    free_blocks = [b["size"] for s in snapshot["segments"] for b in s["blocks"] if b["state"] == "inactive"]
    live = sum(any(b["state"].startswith("active") for b in s["blocks"]) for s in snapshot["segments"])
    return {"reserved": reserved, "allocated": allocated, "unallocated": reserved - allocated,
            "largest_free": max(free_blocks, default=0), "segments": len(snapshot["segments"]), "live": live}


def _samples(df):
    s = df[df.kind == "sample"]
    return {n: v for n, v in zip(s["name"], s.value)}


@pytest.mark.parametrize("case", SNAPS)
def test_snapshot_figures_match_independent_walk(corpus_dir, case):
    path = corpus(*SNAPS[case], "memory_snapshot.pickle")
    assert memory_snapshot.sniff(read_head(path), path.name)
    ref = _independent(load_path(path))
    df, report = parse_with(memory_snapshot, path)
    got = _samples(df)
    assert got["memory.reserved"] == ref["reserved"]
    assert got["memory.allocated"] == ref["allocated"]
    assert got["memory.reserved_unallocated"] == ref["unallocated"]
    assert got["memory.largest_free_block"] == ref["largest_free"]
    assert got["memory.segments"] == ref["segments"]
    assert got["memory.segments_with_live_block"] == ref["live"]
    assert got["memory.fragmentation_ratio"] == pytest.approx(ref["unallocated"] / ref["reserved"])
    per = df[df["name"] == "memory.largest_free_block_per_segment"].iloc[0].a
    assert len(per["largest_free"]) == ref["segments"] and max(per["largest_free"]) == ref["largest_free"]
    assert report.meta["clock"]["domain"] == "unix"


def test_true_fragmentation_facts(corpus_dir):
    """README: 97.49 GiB reserved-unallocated, 41.78 GiB allocated, no 48 MiB hole, every
    segment holds a live tensor."""
    df, _ = parse_with(memory_snapshot, corpus(*SNAPS["frag"], "memory_snapshot.pickle"))
    got = _samples(df)
    assert round(got["memory.reserved_unallocated"] / GiB, 2) == 97.49
    assert round(got["memory.allocated"] / GiB, 2) == 41.78
    assert got["memory.largest_free_block"] < 48 * MiB
    assert got["memory.segments_with_live_block"] == got["memory.segments"]
    oom = df[df.kind == "oom"].iloc[0]
    assert oom.value == 48 * MiB and oom.a["device_free"] < 10 * MiB


def test_process_cap_snapshot_is_not_fragmented(corpus_dir):
    """README: reserved-but-unallocated about 3 % of reserved; matches memory_stats.json."""
    df, _ = parse_with(memory_snapshot, corpus(*SNAPS["cap"], "memory_snapshot.pickle"))
    got = _samples(df)
    assert 0.02 < got["memory.fragmentation_ratio"] < 0.04
    stats = json.loads(corpus(*SNAPS["cap"], "memory_stats.json").read_text())
    assert got["memory.reserved"] == stats["reserved_bytes.all.current"]
    assert got["memory.allocated"] == stats["allocated_bytes.all.current"]


def test_trace_actions_and_clock(corpus_dir):
    path = corpus(*SNAPS["cap"], "memory_snapshot.pickle")
    snap = load_path(path)
    actions = [a for t in snap["device_traces"] for a in t]
    df, _ = parse_with(memory_snapshot, path)
    rows = df[df["loc"].str.startswith("device_traces")]
    assert len(rows) == len(actions)
    assert (rows[rows["name"] == "alloc"].kind == "alloc").all()
    assert (rows[rows["name"] == "oom"].kind == "oom").all()
    assert sorted(rows.ts) == sorted(a["time_us"] * 1000 for a in actions)
    # time_us is the wall clock: Kineto of the same capture (base + ts) lies within seconds
    import gzip
    k = json.load(gzip.open(corpus(*SNAPS["cap"], "kineto_trace.json.gz")))
    base = k["baseTimeNanoseconds"]
    mem = [base + int(e["ts"] * 1000) for e in k["traceEvents"] if e.get("name") == "[memory]"]
    assert abs(min(mem) - rows.ts.min()) < 1_000_000_000


@pytest.mark.parametrize("case", SNAPS)
def test_memory_stats(corpus_dir, case):
    path = corpus(*SNAPS[case], "memory_stats.json")
    raw = json.loads(path.read_text())
    assert memory_stats.sniff(read_head(path), path.name)
    df, report = parse_with(memory_stats, path)
    phases = {k: v for k, v in raw.items() if isinstance(v, dict)} or {"": raw}
    assert len(df) == sum(len(v) for v in phases.values())
    for phase, stats in phases.items():
        rows = df[[a["phase"] == phase for a in df.a]]
        got = dict(zip(rows["name"], rows.value))
        assert got["reserved_bytes.all.current"] == stats["reserved_bytes.all.current"]
        assert got["num_ooms"] == stats["num_ooms"] and got["num_alloc_retries"] == stats["num_alloc_retries"]
    units = dict(zip(df["name"], df.unit))
    assert units["reserved_bytes.all.current"] == "bytes" and units["num_ooms"] == "count"
    assert report.meta["clock"]["domain"] == "none"
    if case == "frag":
        assert report.meta["phases"] == ["before_request", "after"]
