"""Helpers: parse one corpus file through the real pipeline entry and read its events."""
from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ingest.artifact_results import ArtifactResult, parse_one
from tests.support.fixtures import *  # noqa: F401,F403  (the service tests' fixtures)


@pytest.fixture
def parse(tmp_path, corpus_dir):
    def run(path: Path, name: str | None = None) -> tuple[ArtifactResult, "object"]:
        result = parse_one(name or Path(path).name, Path(path), tmp_path)
        df = pq.read_table(result.parquet).to_pandas() if result.parquet else None
        return result, df
    return run
