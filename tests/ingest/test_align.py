import json

import pyarrow as pa
import pytest

from diagnosis.engine.pipeline import load_events
from ingest.engine.align import align_tables, describe_alignment
from ingest.engine.artifact_results import parse_one
from ingest.engine.bundle import expand
from ingest.engine.events import make_batch
from tests.corpus import corpus


def _load(tmp_path, *paths):
    with expand(list(paths), tmp_path / "unpacked") as members:
        results = [parse_one(m.name, m.path, tmp_path) for m in members]
        return {r.name: r for r in results}, load_events(results, members.clock_offsets)[0]


def test_token_latency_rows(parse):
    path = corpus("h200", "healthy_decode", "token_latency.jsonl")
    records = [json.loads(l) for l in path.read_text().splitlines()]
    result, df = parse(path)
    spans, samples = df[df.kind == "span"], df[df.kind == "sample"]
    assert len(spans) == len(samples) == len(records)
    step0 = spans[spans["attrs"].str.contains('"step":0,')].iloc[0]
    assert step0.ts == records[0]["start_ns"] and step0.dur == records[0]["end_ns"] - records[0]["start_ns"]
    assert samples.value.max() == max(r["latency_ms"] for r in records) and set(samples.unit) == {"ms"}


def test_healthy_decode_on_one_clock(tmp_path, corpus_dir):
    results, events = _load(tmp_path, corpus("h200", "healthy_decode"))
    tokens = events[(events.artifact == "token_latency.jsonl") & (events.kind == "span")]
    otlp = events[events.source == "otlp"]
    assert len(tokens) == 48 and len(otlp) == 2 * 49
    generate = otlp[otlp.name == "generate"]
    # every token step lies inside the OTLP "generate" span
    assert (tokens.ts >= generate.ts.min()).all()
    assert ((tokens.ts + tokens.dur) <= (generate.ts + generate.dur).max()).all()
    if results["kineto_trace.json.gz"].error or results["kineto_trace.json.gz"].format != "kineto":
        pytest.skip("kineto parser not available yet")
    kineto = events[events.artifact == "kineto_trace.json.gz"]
    second = 10**9
    for part in (tokens, otlp):
        assert part.ts.min() >= kineto.ts.min() - second and (part.ts + part.dur).max() <= kineto.ts.max() + second


def test_nvml_samples_cover_the_scenarios(tmp_path, corpus_dir):
    results, events = _load(tmp_path, corpus("h200", "nvml"), corpus("h200", "healthy_decode", "token_latency.jsonl"),
                            corpus("h200", "fragmented_decode", "token_latency.jsonl"))
    nvml = events[events.artifact == "nvml_samples.jsonl"]
    tokens = events[events.source == "token_latency"]
    assert nvml.ts.min() <= tokens.ts.min() and tokens.ts.max() <= nvml.ts.max()
    # dmon has only times of day: moved onto the trace's date, within its one-second resolution
    dmon = events[events.artifact == "nvidia-smi-dmon.txt"]
    assert abs(dmon.ts.min() - nvml.ts.min()) < 2 * 10**9
    smi = events[events.artifact == "nvidia-smi-query.csv"]
    assert abs(smi.ts.min() - nvml.ts.min()) < 10**9
    # topo -m has no time: placed at the trace start, flagged
    topo = events[events.artifact == "nvidia-smi-topo.txt"]
    assert topo.ts.min() == min(nvml.ts.min(), tokens.ts.min())
    described = {d["artifact"]: d for d in describe_alignment(
        {n: _table([1795940314000000000]) for n in results}, {n: r.meta for n, r in results.items()})}
    assert described["nvidia-smi-topo.txt"]["domain"] == "none" and described["nvidia-smi-topo.txt"]["aligned"]


def _table(ts):
    return pa.Table.from_batches([make_batch({"ts": list(ts)})])


def test_monotonic_needs_an_offset_and_year_is_repaired():
    anchor = 1_795_940_314 * 10**9
    tables = {"a.json": _table([anchor, anchor + 60 * 10**9]), "perf.txt": _table([2580 * 10**9]),
              "old.log": _table([anchor - 365 * 86400 * 10**9 + 10**9])}
    metas = {"a.json": {"clock": {"domain": "unix"}}, "perf.txt": {"clock": {"domain": "monotonic"}},
             "old.log": {"clock": {"domain": "unix", "year_assumed": 2025}}}
    out = align_tables(tables, metas)
    assert out["perf.txt"].column("ts")[0].as_py() == 2580 * 10**9  # left alone, flagged
    assert not {d["artifact"]: d for d in describe_alignment(tables, metas)}["perf.txt"]["aligned"]
    assert out["old.log"].column("ts")[0].as_py() == anchor + 10**9  # moved to the trace's year
    out = align_tables(tables, metas, clock_offsets={"perf.txt": anchor - 2580 * 10**9})
    assert out["perf.txt"].column("ts")[0].as_py() == anchor
