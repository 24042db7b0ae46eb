"""Rule engine benchmark: >= 10 M events made by tiling a real Kineto trace.

    python bench/bench_rules.py [--rows 10000000] [--target-s 2]

(a) one selection-only rule (target >= 5 M events/s); (b) the whole builtin pack: its
features once, then every rule (target: both together <= 2 s; exit status 1 when missed).
A baseline runs in the same process over the same rows: a plain pandas selection, a regex
over the categorical names and a 1 s tumbling-window count; the pack's time is printed as a
multiple of it, which stays comparable on a busy machine. The trace h200/fragmented_decode
is parsed once with ingest.engine.parse.parse_artifact into a temporary Parquet file, then tiled
with shifted clocks.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ingest.engine.parse import parse_artifact  # noqa: E402
from rules.engine.compiler import compile_pack  # noqa: E402
from rules.engine.evaluator import evaluate_rules, precompute_features  # noqa: E402
from rules.engine.features import TraceContext  # noqa: E402
from rules.engine.loader import load_rule_dirs, load_rule_text  # noqa: E402
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


def baseline(events: pd.DataFrame) -> int:
    """What a hand-written pandas query of the same shape costs: select kernels, a regex over
    the (categorical) names, count them per 1 s window."""
    hits = (events["kind"] == "kernel") & events["name"].str.contains("nvjet|gemm|cutlass", case=False, regex=True)
    per_second = events.loc[hits.to_numpy(), "ts"].floordiv(1_000_000_000).value_counts()
    return int(per_second.sum())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--target-s", type=float, default=2.0, help="the whole pack (features + rules) must fit in this")
    args = ap.parse_args()
    (base_rows, events), _ = timed("parse + tile", lambda: tiled_events(args.rows))
    print(f"events: {len(events):,} (the real trace has {base_rows:,}, tiled {len(events) // base_rows}x)")
    ctx, _ = timed("TraceContext", lambda: TraceContext(events))

    matched, base_s = timed("baseline: pandas selection + regex + 1 s windows", lambda: baseline(ctx.events))
    print(f"    {len(events) / base_s / 1e6:.0f} M events/s; {matched:,} rows")

    selection = compile_pack(load_rule_text(SELECTION_RULE, "bench"))
    (findings, errors), seconds = timed("(a) selection-only rule", lambda: evaluate_rules(selection, ctx))
    print(f"    {len(ctx.events) / seconds / 1e6:.1f} M events/s (target >= 5), {seconds / base_s:.1f}x the baseline; "
          f"matched {findings[0].metrics['count']:,} rows; errors: {errors}")

    pack = compile_pack(load_rule_dirs(None))
    _, features_s = timed("(b) builtin pack: features", lambda: precompute_features(pack, ctx))
    (findings, errors), rules_s = timed(f"(b) builtin pack: {len(pack)} rules",
                                        lambda: evaluate_rules(pack, ctx, time_budget_s=60))
    total = features_s + rules_s
    verdict = "ok" if total <= args.target_s else "MISSED"
    print(f"    whole pack {total:.2f} s (target <= {args.target_s:g}: {verdict}), {total / base_s:.1f}x the baseline "
          f"({features_s / base_s:.1f}x features + {rules_s / base_s:.1f}x rules); "
          f"{len(findings)} findings, {len(errors)} errors")
    for e in errors:
        print(f"    error {e['rule_id']}: {e['error'][:200]}")
    slowest = []
    for cr in pack:
        t = time.perf_counter()
        evaluate_rules([cr], ctx, time_budget_s=60)
        slowest.append((time.perf_counter() - t, cr.id))
    for t, rule_id in sorted(slowest, reverse=True)[:5]:
        print(f"    {rule_id}: {t:.3f} s alone (features cached)")
    return 0 if total <= args.target_s else 1


if __name__ == "__main__":
    sys.exit(main())
