"""The engine on a real capture: the fragmented-decode Kineto trace from the corpus.

The trace is turned into event rows here with the json module (a deliberately simple
mapping, independent of the ingest parsers); every expected figure is counted directly
from the JSON in the test.
"""
import gzip
import json
import re
from collections import Counter

import pytest

from tests.corpus import corpus
from tests.rules.helpers import events, run

KINDS = {"cpu_op": "cpu_op", "cuda_runtime": "runtime", "cuda_driver": "driver", "kernel": "kernel",
         "gpu_memset": "memset", "gpu_memcpy": "memcpy", "cpu_instant_event": "sample"}


@pytest.fixture(scope="module")
def trace(corpus_dir):
    path = corpus("h200", "fragmented_decode", "kineto_trace.json.gz")
    raw = [e for e in json.load(gzip.open(path))["traceEvents"] if e.get("cat") in KINDS and "ts" in e]
    rows = [{"ts": int(float(e["ts"]) * 1000), "dur": int(float(e.get("dur", 0)) * 1000), "kind": KINDS[e["cat"]],
             "name": e["name"], "pid": int(e["pid"]) if str(e.get("pid")).isdigit() else -1,
             "artifact": "kineto_trace.json.gz", "loc": f"traceEvents[{i}]", "attrs": e.get("args", {})}
            for i, e in enumerate(raw)]
    return raw, events(rows)


def test_regex_on_real_kernel_names(trace):
    raw, frame = trace
    expected = sum(1 for e in raw if e["cat"] == "kernel" and re.search(r"(?i)nvjet|FLASH", e["name"]))
    assert expected > 0
    f = run("match:\n  k: {kind: kernel, name|re|i: 'NVJET|flash'}\ncondition: k\n", frame)[0]
    assert f.metrics["count"] == expected


def test_group_by_name_with_duration_aggregates(trace):
    raw, frame = trace
    launches = [e for e in raw if e["cat"] == "cuda_runtime" and e["name"] == "cudaLaunchKernel"]
    body = """
    match:
      rt: {kind: runtime, name|startswith: cudaLaunch}
    condition: rt
    aggregate:
      by: [name]
      having: count > 100
    explain: "{count} x {name}, p50 {metrics.p50_dur|dur}"
    """
    by_name = {f.group["name"]: f for f in run(body, frame)}
    counts = Counter(e["name"] for e in raw if e["cat"] == "cuda_runtime" and e["name"].startswith("cudaLaunch"))
    assert {n: f.metrics["count"] for n, f in by_name.items()} == {n: c for n, c in counts.items() if c > 100}
    assert by_name["cudaLaunchKernel"].metrics["count"] == len(launches)


def test_attrs_numeric_path_on_real_allocator_events(trace):
    raw, frame = trace
    big = [e for e in raw if e["cat"] == "cpu_instant_event" and e.get("args", {}).get("Bytes", 0) >= 1024**2]
    body = "match:\n  m: {kind: sample, name: '[memory]', attrs.Bytes|gte: 1MiB}\ncondition: m\n"
    findings = run(body, frame)
    assert (findings[0].metrics["count"] if findings else 0) == len(big)
    assert big
    first = min(big, key=lambda e: float(e["ts"]))
    assert findings[0].start_ts == int(float(first["ts"]) * 1000)
