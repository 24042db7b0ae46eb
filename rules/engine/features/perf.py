"""Host-side features from perf / bpftrace rows (pure pandas, no Django).

Both return rows in the event-table shape (ts, dur, kind="sample", name, host, pid, tid,
value, unit, attrs as a JSON string) so rules select them like any other sample:

* top_host_functions: per process, the functions that hold the most CPU samples. value =
  self share in % (samples whose leaf frame is the function); attrs.inclusive_share = % of
  samples with the function anywhere on the stack (each sample counted once).
* futex_wait_per_thread: per thread, time spent waiting in futex/lock waits (perf trace
  futex WAIT ops, bpftrace "*wait*" sync rows): value = total ms, attrs count/mean/max.

The numbers are also plain columns (self_share, inclusive_share, samples; count, total_ms,
mean_ms, max_ms) so rules can aggregate on them. Registered as features of the same names.
"""
from __future__ import annotations

import orjson
import pandas as pd

from ingest.engine.trace_frame import as_event_frame, category_mask, text_values
from rules.engine.features import feature

TOP_N = 20
COLUMNS = ["ts", "dur", "kind", "name", "host", "pid", "tid", "value", "unit", "attrs"]


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in zip(
        COLUMNS, ["int64", "int64", "object", "object", "object", "int64", "int64", "float64", "object", "object"])})


def top_host_functions(events: pd.DataFrame, top_n: int = TOP_N) -> pd.DataFrame:
    rows = events[(events["kind"] == "sample") & (events["source"] == "perf")]  # the text test on these only
    rows = rows[rows["attrs"].str.contains('"stack":', regex=False)]
    if rows.empty:
        return _empty()
    parsed = [orjson.loads(a) for a in rows["attrs"]]
    frame = pd.DataFrame({"ts": rows["ts"].to_numpy(), "host": text_values(rows["host"]),
                          "pid": rows["pid"].to_numpy(), "leaf": text_values(rows["name"]),
                          "comm": [p.get("comm", "") for p in parsed],
                          "stack": [list(dict.fromkeys(p.get("stack") or [])) for p in parsed]})
    out = []
    for (host, pid), proc in frame.groupby(["host", "pid"], sort=False):
        total = len(proc)
        self_counts = proc["leaf"].value_counts()
        inclusive = proc["stack"].explode().dropna().value_counts()
        names = self_counts.index.union(inclusive.index)
        table = pd.DataFrame({"self": self_counts.reindex(names, fill_value=0),
                              "inclusive": inclusive.reindex(names, fill_value=0)})
        table = table.sort_values(["self", "inclusive"], ascending=False).head(top_n)
        comm = proc["comm"].mode().iat[0] if not proc["comm"].empty else ""
        first, last = int(proc["ts"].min()), int(proc["ts"].max())
        for name, r in table.iterrows():
            out.append({"ts": first, "dur": last - first, "kind": "sample", "name": str(name), "host": host,
                        "pid": int(pid), "tid": -1, "value": 100.0 * int(r["self"]) / total, "unit": "%",
                        "attrs": orjson.dumps({"feature": "top_host_functions", "comm": comm,
                                               "self_samples": int(r["self"]), "inclusive_samples": int(r["inclusive"]),
                                               "self_share": round(100.0 * int(r["self"]) / total, 3),
                                               "inclusive_share": round(100.0 * int(r["inclusive"]) / total, 3),
                                               "process_samples": total}).decode(),
                        "self_share": 100.0 * int(r["self"]) / total,
                        "inclusive_share": 100.0 * int(r["inclusive"]) / total, "samples": int(r["self"])})
    return pd.DataFrame(out, columns=COLUMNS + ["self_share", "inclusive_share", "samples"])


def futex_wait_per_thread(events: pd.DataFrame) -> pd.DataFrame:
    sync = events[events["kind"] == "sync"]
    lockish = category_mask(sync["name"], lambda n: n.str.contains("wait|lock|mutex", regex=True) & n.ne("futex"))
    futex = (sync["name"] == "futex").to_numpy()
    waits = sync[lockish | (futex & sync["attrs"].str.contains('"wait":true', regex=False).to_numpy(dtype=bool))]
    if waits.empty:
        return _empty()
    frame = pd.DataFrame({"host": text_values(waits["host"]), "pid": waits["pid"], "tid": waits["tid"],
                          "ts": waits["ts"], "end": waits["ts"] + waits["dur"], "dur": waits["dur"],
                          "source": text_values(waits["source"])})
    out = []
    for (host, pid, tid), g in frame.groupby(["host", "pid", "tid"], sort=True):
        count, total = len(g), int(g["dur"].sum())
        out.append({"ts": int(g["ts"].min()), "dur": int(g["end"].max() - g["ts"].min()), "kind": "sample",
                    "name": "futex_wait", "host": host, "pid": int(pid), "tid": int(tid), "value": total / 1e6,
                    "unit": "ms", "attrs": orjson.dumps({
                        "feature": "futex_wait_per_thread", "count": count, "total_ms": total / 1e6,
                        "mean_ms": total / count / 1e6, "max_ms": int(g["dur"].max()) / 1e6,
                        "sources": sorted(set(g["source"]))}).decode(),
                    "count": count, "total_ms": total / 1e6, "mean_ms": total / count / 1e6,
                    "max_ms": int(g["dur"].max()) / 1e6})
    return pd.DataFrame(out, columns=COLUMNS + ["count", "total_ms", "mean_ms", "max_ms"])


@feature("top_host_functions", doc="Per process, the host functions holding the most perf samples: value = "
                                   "self share in %, inclusive_share = % of samples with it on the stack.")
def _top_host_functions_feature(ctx) -> pd.DataFrame:
    return as_event_frame(top_host_functions(ctx.events))


@feature("futex_wait_per_thread", doc="Per thread, futex/lock wait time from perf trace and bpftrace: value = "
                                      "total ms; count, mean_ms, max_ms.")
def _futex_wait_per_thread_feature(ctx) -> pd.DataFrame:
    return as_event_frame(futex_wait_per_thread(ctx.events))
