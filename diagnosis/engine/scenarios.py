"""Corpus scenarios (a folder or a file under the corpus root) run through the pipeline.

Rule tests (`tests: fires/quiet`), the coverage table and the acceptance tests all parse a
scenario once and evaluate rules over its events many times.
"""
from __future__ import annotations

import functools
import hashlib
import tempfile
from pathlib import Path

import pandas as pd

from diagnosis.engine.pipeline import diagnose, load_events
from ingest.engine.artifact_results import ArtifactResult, parse_one
from ingest.engine.bundle import expand

_WORKDIR = tempfile.TemporaryDirectory(prefix="tracedoc-scenarios-")


@functools.lru_cache(maxsize=64)
def parsed(path: str) -> tuple[tuple[ArtifactResult, ...], dict]:
    """(artifact results, clock offsets) of one scenario, parsed once per process."""
    work = Path(_WORKDIR.name) / hashlib.sha256(path.encode()).hexdigest()[:16]
    work.mkdir(parents=True, exist_ok=True)
    with expand([path], work / "unpacked") as members:
        return tuple(parse_one(m.name, m.path, work) for m in members), dict(members.clock_offsets)


def events(path: str | Path) -> pd.DataFrame:
    results, offsets = parsed(str(Path(path).resolve()))
    return load_events(results, offsets)[0]


def report(path: str | Path, rules=None) -> dict:
    results, offsets = parsed(str(Path(path).resolve()))
    return diagnose(list(results), rules=rules, clock_offsets=offsets).to_dict()


def list_scenarios(corpus_root: str | Path) -> list[str]:
    """Scenario names relative to the corpus root: h200/* and cpu files, public logs and
    flight-recorder texts."""
    root = Path(corpus_root)
    names = [f"h200/{p.name}" for p in sorted((root / "h200").iterdir()) if p.is_dir()]
    names += [f"cpu/{p.name}" for p in sorted((root / "cpu").glob("*.txt"))]
    names += [f"public/logs/{p.name}" for p in sorted((root / "public" / "logs").glob("*.log"))]
    names += [f"public/flight_recorder/{p.name}" for p in sorted((root / "public" / "flight_recorder").glob("*.txt"))]
    return names
