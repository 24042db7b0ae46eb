"""Reading an opened Nsight Systems SQLite export into events (the body of `nsys.sqlite`).

Read-only; every table is read with one SQL query in chunks (pandas), names resolved
through StringIds in SQL, attrs serialised column-wise. Absolute time = session start
(TARGET_INFO_SESSION_START_TIME.utcEpochNs) + the table's relative ns.
"""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport
from ingest.engine.parsers.nsys.tables import MEM_KIND, MEMCPY_OPER, NVTX_MARK, SYNC_TYPE, queries

REQUIRED_TABLE = "StringIds"  # every nsys export has it; other SQLite files do not
READ_ROWS = 500_000
_API_VERSION = re.compile(r"_v\d+$")  # cudaLaunchKernel_v7000 -> cudaLaunchKernel


def parse(path: Path, sink: EventSink, report: ParseReport) -> None:
    path = Path(path)
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        columns = _schema(con)
    except sqlite3.DatabaseError as e:
        raise ParseError(str(path), "SQLite header", "a readable SQLite database",
                         got=f"an unreadable one ({e})") from None
    try:
        if REQUIRED_TABLE not in columns:
            raise ParseError(str(path), f"table {REQUIRED_TABLE}",
                             "an Nsight Systems export (nsys export --type sqlite)",
                             got=f"a SQLite file without table {REQUIRED_TABLE}, so not one")
        offset = _clock(con, columns, report)
        _meta(con, columns, report)
        enums = _enums(con, columns)
        for q in queries(columns):
            try:
                for df in pd.read_sql_query(q.sql, con, chunksize=READ_ROWS):
                    _emit(df, q.table, q.kind, q.attrs, offset, enums, sink, report)
            except sqlite3.DatabaseError as e:
                report.warn(f"table {q.table}: not read ({e})")
        report.meta["tables"] = sorted(t for t in columns if not t.startswith("ENUM_"))
    finally:
        con.close()


def _schema(con: sqlite3.Connection) -> dict[str, set[str]]:
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {t: {r[1] for r in con.execute(f'PRAGMA table_info("{t}")')} for t in tables}


def _clock(con: sqlite3.Connection, columns: dict[str, set[str]], report: ParseReport) -> int:
    table = "TARGET_INFO_SESSION_START_TIME"
    for col in ("utcEpochNs", "systemClockNs"):
        if col in columns.get(table, ()):
            row = con.execute(f"SELECT {col} FROM {table}").fetchone()
            if row and row[0]:
                report.set_clock(Clock("unix", source=f"{table}.{col} + start"))
                report.meta["session_start_ns"] = int(row[0])
                return int(row[0])
    report.set_clock(Clock("relative", note=f"no {table}: ns since the profiling session start"))
    return 0


def _meta(con: sqlite3.Connection, columns: dict[str, set[str]], report: ParseReport) -> None:
    if "TARGET_INFO_GPU" in columns:
        gpus = pd.read_sql_query("SELECT * FROM TARGET_INFO_GPU", con)
        report.meta["devices"] = [
            {k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items() if v is not None}
            for row in gpus.to_dict("records")]
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table in columns:
            report.meta["export"] = dict(con.execute(f"SELECT name, value FROM {table}").fetchall())
            break


def _enums(con: sqlite3.Connection, columns: dict[str, set[str]]) -> dict[str, dict[int, str]]:
    def read(table: str, fallback: dict[int, str]) -> dict[int, str]:
        if table in columns:
            return {int(k): v for k, v in con.execute(f"SELECT id, label FROM {table}")}
        return fallback
    return {"mem_kind": read("ENUM_CUDA_MEM_KIND", MEM_KIND),
            "sync_type": read("ENUM_CUPTI_SYNC_TYPE", SYNC_TYPE)}


def _labels(ids: pd.Series, mapping: dict[int, str]) -> pd.Series:
    return ids.map(mapping).fillna("Unknown")


def _emit(df: pd.DataFrame, table: str, kind: str, attr_cols: list[str], offset: int,
          enums: dict[str, dict[int, str]], sink: EventSink, report: ParseReport) -> None:
    if df.empty:
        return
    df, names, kinds, attr_cols = _names_and_kinds(df.reset_index(drop=True), table, kind, attr_cols, enums, report)
    n = len(df)
    ts = pd.to_numeric(df["ts"], errors="coerce")
    bad = ts.isna().to_numpy()
    if bad.any():
        report.skipped[f"{table} row without start"] += int(bad.sum())
        df, names, kinds, ts = df[~bad], names[~bad], kinds[~bad], ts[~bad]
        n = len(df)
        if not n:
            return

    def ints(col: str) -> np.ndarray:
        return pd.to_numeric(df[col], errors="coerce").fillna(-1).astype(np.int64).to_numpy()

    attrs = df[attr_cols].to_json(orient="records", lines=True).splitlines() if attr_cols else ["{}"] * n
    sink.emit_columns({
        "ts": ts.astype(np.int64).to_numpy() + offset,
        "dur": np.maximum(ints("dur"), 0),
        "kind": kinds.to_numpy(dtype=object), "name": names.to_numpy(dtype=object),
        "pid": ints("pid"), "tid": ints("tid"), "device": ints("device").astype(np.int32),
        "stream": ints("stream"), "corr": ints("corr"),
        "value": pd.to_numeric(df["value"], errors="coerce").to_numpy(dtype=float),
        "attrs": attrs,
        "loc": (f"{table} rowid " + df["rid"].astype(str)).to_numpy(dtype=object),
    })


def _names_and_kinds(df: pd.DataFrame, table: str, kind: str, attr_cols: list[str],
                     enums: dict[str, dict[int, str]], report: ParseReport,
                     ) -> tuple[pd.DataFrame, pd.Series, pd.Series, list[str]]:
    """Each row's name and kind as `table` records them, with the derived columns its attrs
    list (copy and memory kinds, sync type, the versioned API name); 2.x's nested twins of
    runtime calls are dropped (counted in `report.skipped`)."""
    kinds = pd.Series([kind] * len(df))
    names = df["name"].fillna("").astype(str)
    if table == "CUPTI_ACTIVITY_KIND_RUNTIME":
        df["api_name"] = names
        names = names.str.replace(_API_VERSION, "", regex=True)
        # 2.x exports record each call twice (cudaMalloc, then nested cudaMalloc_v3020)
        twin = pd.DataFrame({"n": names, "c": df["corr"], "t": df["tid"]}).duplicated() & (df["corr"] >= 0)
        if twin.any():
            report.skipped[f"{table} nested versioned twin of an API call"] += int(twin.sum())
            df, names = df[~twin].reset_index(drop=True), names[~twin].reset_index(drop=True)
            kinds = kinds[: len(df)]
        kinds = kinds.where(~(names.str.startswith("cu") & ~names.str.startswith("cuda")), "driver")
        attr_cols = attr_cols + ["api_name"]
    elif table == "CUPTI_ACTIVITY_KIND_MEMCPY":
        src = _labels(df["src_kind_id"], enums["mem_kind"])
        dst = _labels(df["dst_kind_id"], enums["mem_kind"])
        df["copy"] = df["copy_kind_id"].map(MEMCPY_OPER).fillna("Unknown")
        df["src_kind"], df["dst_kind"] = src.str.lower(), dst.str.lower()
        df["memcpy_kind"] = df["src_kind"].where(df["src_kind"] != "device", df["dst_kind"])
        names = "Memcpy " + df["copy"] + " (" + src + " -> " + dst + ")"
    elif table == "CUPTI_ACTIVITY_KIND_MEMSET":
        df["mem_kind"] = _labels(df["mem_kind_id"], enums["mem_kind"]).str.lower()
        names = "Memset (" + _labels(df["mem_kind_id"], enums["mem_kind"]) + ")"
    elif table == "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION":
        df["sync_type"] = _labels(df["sync_type_id"], enums["sync_type"])
        names = df["sync_type"]
    elif table == "CUDA_GPU_MEMORY_USAGE_EVENTS":
        kinds = kinds.where(df["operation"] != 1, "free")
        df["mem_kind"] = _labels(df["mem_kind_id"], enums["mem_kind"]).str.lower()
    elif table == "NVTX_EVENTS":
        kinds = kinds.where(df["event_type"] != NVTX_MARK, "marker")
    return df, names, kinds, attr_cols
