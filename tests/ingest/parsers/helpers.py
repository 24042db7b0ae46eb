"""One way to run a parser in a test: a file in, its events as a DataFrame and what the parser
said of it out.

`parse_to_frame` goes the service's way (detect the format, `parse_artifact` -> Parquet, read
back; its ParseReport); `parse_result` goes the pipeline's way (`parse_one`: the artifact's
result as a trace stores it, error included); `parse_with` calls one parser module directly
(its keyword options, no detection). All give the same frame shape: name-like columns as plain
strings, `a` the decoded attrs.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ingest.engine.artifact_results import ArtifactResult, parse_one
from ingest.engine.events import EventSink, ParseReport
from ingest.engine.parse import parse_artifact

_TEXT_COLUMNS = ("kind", "name", "severity", "unit")


def parse_to_frame(path: Path, tmp_path: Path) -> tuple[pd.DataFrame, ParseReport]:
    out = tmp_path / (path.name + ".parquet")
    report = parse_artifact(path, out, path.name)
    return _frame(pq.read_table(out)), report


def parse_result(path: Path, tmp_path: Path, name: str | None = None) -> tuple[ArtifactResult, pd.DataFrame | None]:
    result = parse_one(name or path.name, path, tmp_path)
    return result, (_frame(pq.read_table(result.parquet)) if result.parquet else None)


def parse_with(module, path: Path, **kwargs) -> tuple[pd.DataFrame, ParseReport]:
    batches: list = []
    sink = EventSink("artifact", module.SOURCE, batches.append)
    report = ParseReport(format=module.FORMAT)
    module.parse(Path(path), sink, report, **kwargs)
    sink.flush()
    if not batches:
        return pd.DataFrame(columns=["kind", "name", "attrs", "loc", "a"]), report
    return _frame(pa.Table.from_batches(batches)), report


def _frame(table: pa.Table) -> pd.DataFrame:
    df = table.to_pandas()
    for col in _TEXT_COLUMNS:
        if col in df:
            df[col] = df[col].astype(str)
    df["a"] = [json.loads(s) for s in df["attrs"]]
    return df


def load_json(path: Path) -> dict:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)  # stdlib: arbitrary-size ints, independent of the parser


def attrs(frame: pd.DataFrame) -> list[dict]:
    return [orjson.loads(a) for a in frame["attrs"]]
