"""One file of a trace parsed, its failures contained: `ArtifactResult`.

The service's parse task calls `parse_one()` (events to a Parquet file), the CLI
`parse_in_memory()` (events kept as an Arrow table); both give the same result, which the
diagnosis reads (diagnosis.engine.pipeline).
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pyarrow as pa

from ingest.engine import interruptions
from ingest.engine.duplicate_profiles import DuplicateProfile
from ingest.engine.events import ParseError
from ingest.engine.parse import InternalParseError, Progress, parse_artifact, parse_to_table
from ingest.engine.stored_file import StoredFile


@dataclass
class ArtifactResult:
    name: str                      # path inside the trace (bundle-relative)
    format: str = ""
    events: int = 0
    warnings: list[str] = field(default_factory=list)
    error: str = ""                # set when the file was unusable
    parquet: Path | StoredFile | None = None  # the service's stored events (ingest/engine/stored_file.py)
    meta: dict = field(default_factory=dict)
    table: pa.Table | None = field(default=None, repr=False, compare=False)  # events kept in memory (CLI)
    internal_error: bool = False   # `error` is a tracedoc bug, not bad input (CLI exit 3)
    rename: bool = False           # the stored events name the file otherwise: show them under `name`
    duplicate: DuplicateProfile | None = None  # another file holds the same events: this one's are left out

    def all_warnings(self) -> list[str]:
        """The parser's warnings, the error, and the duplicate's note."""
        return self.warnings + ([self.error] if self.error else []) + \
            ([self.duplicate.warning()] if self.duplicate else [])

    def to_report(self) -> dict:
        entry = {"path": self.name, "format": self.format or "unknown", "events": self.events,
                 "warnings": self.all_warnings()}
        if self.internal_error:
            entry["internal_error"] = True
        return entry


def parse_one(name: str, path: Path, workdir: Path, progress: Progress | None = None) -> ArtifactResult:
    """Parse one file to its Parquet file; an unusable file gives a result with `error`, never
    an exception (see `_contained`)."""
    out = Path(workdir) / (_safe_stem(name) + ".parquet")

    def parse() -> ArtifactResult:
        report = parse_artifact(Path(path), out, artifact_id=name, name=name, progress=progress)
        return ArtifactResult(name=name, format=report.format, events=report.events,
                              warnings=report.summary_warnings(), parquet=out, meta=report.meta)
    return _contained(name, parse)


def parse_in_memory(name: str, path: Path, progress: Progress | None = None) -> ArtifactResult:
    """parse_one without the Parquet file: the events stay in `table` for a diagnosis in
    this process."""
    def parse() -> ArtifactResult:
        report, table = parse_to_table(Path(path), artifact_id=name, name=name, progress=progress)
        return ArtifactResult(name=name, format=report.format, events=report.events,
                              warnings=report.summary_warnings(), meta=report.meta, table=table)
    return _contained(name, parse)


def _contained(name: str, parse: Callable[[], ArtifactResult]) -> ArtifactResult:
    """One file's parse with its failures kept on its result: an unusable file is `error`; a
    parser bug (or storage, the Parquet writer) is flagged `internal_error` too, so one file
    cannot take the diagnosis of the others down."""
    try:
        return parse()
    except InternalParseError as e:
        return ArtifactResult(name=name, error=str(e), internal_error=True)
    except ParseError as e:
        return ArtifactResult(name=name, error=str(e))
    except Exception as e:  # outside the parser: still not this trace's fault
        interruptions.reraise(e)
        what = f"{type(e).__name__}: {e}"[:300]
        return ArtifactResult(name=name, internal_error=True,
                              error=f"{name}: internal error while parsing ({what}): a tracedoc bug, not a "
                                    "problem with the file; the other files were still diagnosed")


def _safe_stem(name: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[-80:]
    return f"{stem}.{hashlib.sha256(name.encode()).hexdigest()[:8]}"
