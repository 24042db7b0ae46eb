"""Features cost what the trace costs: no copy of a whole string column as Python strings, no
scan of the whole table per incident. Checked by what they allocate and how often they decode
attrs, not by timing (an 8 MB log of tracebacks and OOMs cost 14.8 s and 900 MB before)."""
from __future__ import annotations

import tracemalloc

import orjson
import pyarrow as pa

import rules.engine.features.oom as oom
from diagnosis.engine.pipeline import event_frame
from ingest.engine.events import DEFAULTS, make_batch
from rules.engine.features import TraceContext
from rules.engine.features.cuda_graph import _interleaved_thread_conflicts


def frame(rows: list[dict]):
    """As the pipeline builds it: attrs as Arrow strings, names categorical."""
    keys = {k for r in rows for k in r}
    cols = {k: [r.get(k, DEFAULTS[k]) for r in rows] for k in keys}
    cols["attrs"] = [orjson.dumps(a).decode() for a in cols["attrs"]]
    return event_frame(pa.Table.from_batches([make_batch(cols)]))


def test_the_interleaved_thread_check_reads_log_lines_without_copying_them():
    lines = 20_000
    rows = [{"ts": i, "kind": "log", "name": "log", "source": "log", "artifact": "worker.log",
             "loc": f"line {i + 1}", "attrs": {"text": "x" * 2000}} for i in range(lines)]
    ctx = TraceContext(frame(rows))
    ctx.index.rows("log")  # the shared index is built once per diagnosis, not by this check
    tracemalloc.start()
    found = _interleaved_thread_conflicts(ctx, [({}, {})], [({}, {})], set())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert found == []
    # the column as Python strings would be 40 MB (20,000 lines of 2 KB)
    assert peak < 8 * 1024**2, f"{peak / 1024**2:.1f} MiB held while filtering {lines} log lines"


def test_capture_checks_decode_each_error_once_however_many_ooms(monkeypatch):
    errors, ooms = 2_000, 200
    rows = [{"ts": i, "kind": "error", "name": "RuntimeError", "source": "log", "artifact": "serve.log",
             "loc": f"line {i + 1}", "attrs": {"text": "boom", "chained_after": f"line {i}"}}
            for i in range(errors)]
    rows += [{"ts": errors + k, "kind": "oom", "name": "OutOfMemoryError", "source": "log", "artifact": "serve.log",
              "pid": 100 + k,  # one process each: not one failure printed again
              "loc": f"line {errors + 10 * k + 1}",
              "attrs": {"text": f"CUDA out of memory. Tried to allocate {k + 1}.00 GiB"}} for k in range(ooms)]
    ctx = TraceContext(frame(rows))
    calls = [0]
    decode = oom._attrs

    def counting(raw):
        calls[0] += 1
        return decode(raw)
    monkeypatch.setattr(oom, "_attrs", counting)
    found = ctx.feature("oom_analysis")
    assert len(found) == ooms
    # one pass over the errors and a few reads per OOM; per OOM over every error would be 400,000
    assert calls[0] < 3 * (errors + ooms), calls[0]
