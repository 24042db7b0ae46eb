"""Rule engine benchmark: >= 10 M events made by tiling a real Kineto trace.

    python bench/bench_rules.py [--rows 10000000]

(a) one selection-only rule (target >= 5 M events/s), (b) the whole builtin pack
(target <= 10 s on a 2-core machine). The trace h200/fragmented_decode is parsed once with
ingest.parse.parse_artifact into a temporary Parquet file, then tiled with shifted clocks.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ingest.parse import parse_artifact  # noqa: E402
from rules.compiler import compile_rule  # noqa: E402
from rules.evaluator import evaluate_rules  # noqa: E402
from rules.features import TraceContext  # noqa: E402
from rules.loader import load_rule_dirs, load_rule_text  # noqa: E402
from tests.corpus import corpus  # noqa: E402

SELECTION_RULE = """
id: bench.gemm-kernels
version: 1
title: GEMM-like kernels
status: experimental
severity: info
match:
  k:
    kind: kernel
    name|re|i: 'nvjet|gemm|cutlass'
condition: k
explain: "{count} GEMM kernels, first {first.name}"
"""


def tiled_events(rows: int):
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "kineto.parquet"
        parse_artifact(corpus("h200", "fragmented_decode", "kineto_trace.json.gz"), out, artifact_id="kineto_trace.json.gz")
        base = pq.read_table(out)
    span = pc.max(base["ts"]).as_py() - pc.min(base["ts"]).as_py() + 1
    copies = -(-rows // base.num_rows)
    tables = [base.set_column(0, "ts", pc.add(base["ts"], i * span)) for i in range(copies)]
    table = pa.concat_tables(tables).unify_dictionaries().slice(0, rows)
    return base.num_rows, table.to_pandas()


def timed(label: str, fn):
    started = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - started
    print(f"{label}: {seconds:.2f} s")
    return result, seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    args = ap.parse_args()
    (base_rows, events), _ = timed("parse + tile", lambda: tiled_events(args.rows))
    print(f"events: {len(events):,} (the real trace has {base_rows:,}, tiled {len(events) // base_rows}x)")
    ctx, _ = timed("TraceContext", lambda: TraceContext(events))

    selection = [compile_rule(r) for r in load_rule_text(SELECTION_RULE, "bench")]
    (findings, errors), seconds = timed("(a) selection-only rule", lambda: evaluate_rules(selection, ctx))
    print(f"    {len(ctx.events) / seconds / 1e6:.1f} M events/s (target >= 5); matched "
          f"{findings[0]['metrics']['count']:,} rows; errors: {errors}")

    pack = [compile_rule(r) for r in load_rule_dirs(None)]
    (findings, errors), seconds = timed(f"(b) builtin pack, {len(pack)} rules",
                                        lambda: evaluate_rules(pack, ctx, time_budget_s=60))
    print(f"    {seconds:.2f} s (target <= 10): {len(findings)} findings, {len(errors)} errors")
    for e in errors:
        print(f"    error {e['rule_id']}: {e['error'][:200]}")
    slowest = []
    for cr in pack:
        t = time.perf_counter()
        evaluate_rules([cr], ctx, time_budget_s=60)
        slowest.append((time.perf_counter() - t, cr.id))
    for t, rule_id in sorted(slowest, reverse=True)[:5]:
        print(f"    {rule_id}: {t:.2f} s (features cached)")


if __name__ == "__main__":
    main()
