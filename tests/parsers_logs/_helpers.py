"""Run one of our parsers on a file and hand back its rows as a DataFrame."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa

from ingest.events import EventSink, ParseReport


def parse_with(module, path: Path, **kwargs) -> tuple[pd.DataFrame, ParseReport]:
    batches: list = []
    sink = EventSink("artifact", module.SOURCE, batches.append)
    report = ParseReport(format=module.FORMAT)
    module.parse(Path(path), sink, report, **kwargs)
    sink.flush()
    table = pa.Table.from_batches(batches) if batches else pa.table({})
    df = table.to_pandas() if batches else pd.DataFrame(columns=["kind", "name", "attrs", "loc"])
    for col in ("kind", "name", "severity", "unit"):
        if col in df:
            df[col] = df[col].astype(str)
    df["a"] = [json.loads(s) for s in df["attrs"]]
    return df, report
