"""Shared helpers: run the real pipeline (parse_artifact -> Parquet) and read it back."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import orjson
import pandas as pd
import pyarrow.parquet as pq

from ingest.parse import parse_artifact


def parse_to_frame(path: Path, tmp_path: Path) -> tuple[pd.DataFrame, object]:
    out = tmp_path / (path.name + ".parquet")
    report = parse_artifact(path, out, path.name)
    frame = pq.read_table(out).to_pandas()
    for col in ("kind", "name"):
        frame[col] = frame[col].astype(str)
    return frame, report


def load_json(path: Path) -> dict:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)  # stdlib: arbitrary-size ints, independent of the parser


def attrs(frame: pd.DataFrame) -> list[dict]:
    return [orjson.loads(a) for a in frame["attrs"]]
