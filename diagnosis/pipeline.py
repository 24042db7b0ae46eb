"""The whole diagnosis in-process: files -> events -> findings -> report.

The CLI calls `run()`; the Celery tasks call `parse_one()` per artifact and then
`diagnose()` on the stored Parquet files, so both paths give the same report.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ingest.events import SCHEMA, ParseError, ParseReport
from ingest.parse import parse_artifact


@dataclass
class ArtifactResult:
    name: str                      # path inside the trace (bundle-relative)
    format: str = ""
    events: int = 0
    warnings: list[str] = field(default_factory=list)
    error: str = ""                # set when the file was unusable
    parquet: Path | None = None
    meta: dict = field(default_factory=dict)

    def to_report(self) -> dict:
        return {"path": self.name, "format": self.format or "unknown", "events": self.events,
                "warnings": self.warnings + ([self.error] if self.error else [])}


def parse_one(name: str, path: Path, workdir: Path,
              progress: Callable[[int], None] | None = None) -> ArtifactResult:
    """Parse one file; an unusable file gives a result with `error`, never an exception."""
    out = Path(workdir) / (_safe_stem(name) + ".parquet")
    try:
        report: ParseReport = parse_artifact(Path(path), out, artifact_id=name, name=name,
                                             progress=progress)
    except ParseError as e:
        return ArtifactResult(name=name, error=str(e))
    return ArtifactResult(name=name, format=report.format, events=report.events,
                          warnings=report.summary_warnings(), parquet=out, meta=report.meta)


def _safe_stem(name: str) -> str:
    import hashlib
    import re
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[-80:]
    return f"{stem}.{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def load_events(artifacts: Iterable[ArtifactResult],
                clock_offsets: dict[str, int] | None = None) -> tuple[pd.DataFrame, list[dict]]:
    """All artifacts' events on one clock, as one DataFrame sorted by time, and the
    alignment that was applied (one entry per artifact, shown in the report)."""
    from ingest.align import apply_alignment, describe_plans, plan_alignment
    artifacts = list(artifacts)
    tables = {a.name: pq.read_table(a.parquet) for a in artifacts if a.parquet and a.parquet.exists()}
    if not tables:
        return SCHEMA.empty_table().to_pandas(), []
    metas = {a.name: a.meta for a in artifacts}
    plans = plan_alignment(tables, metas, clock_offsets)  # once: it reads every table's time range
    alignment = describe_plans(plans)
    aligned = apply_alignment(tables, plans)
    table = pa.concat_tables(list(aligned.values()), promote_options="permissive").unify_dictionaries()
    df = table.to_pandas()
    return df.sort_values("ts", kind="stable", ignore_index=True), alignment


def diagnose(artifacts: list[ArtifactResult], rules=None, clock_offsets: dict[str, int] | None = None,
             warnings: list[str] | None = None, slos=None) -> dict:
    """Report (DESIGN.md "Interfaces") for parsed artifacts."""
    from diagnosis.report import build_report
    events, alignment = load_events(artifacts, clock_offsets)
    report = build_report(artifacts, events, rules=rules, alignment=alignment, slos=slos)
    report["trace"]["warnings"] = list(warnings or [])
    extents = _extents(events)
    for entry in report["trace"]["artifacts"]:
        entry["start_ts"], entry["end_ts"] = extents.get(entry["path"], (None, None))
    return report


def _extents(events: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """Each artifact's first and last time on the common clock (rows without a time ignored)."""
    timed = events[events["ts"] > 0]
    if timed.empty:
        return {}
    ends = timed["ts"] + timed["dur"]
    grouped = pd.DataFrame({"artifact": timed["artifact"].astype(str), "ts": timed["ts"], "end": ends}) \
        .groupby("artifact").agg(start=("ts", "min"), end=("end", "max"))
    return {name: (int(r.start), int(r.end)) for name, r in grouped.iterrows()}


def run(paths: list[str | Path], rules_dir: str | Path | None = None, rules=None,
        show_progress: bool = False) -> dict:
    """CLI entry: expand folders/archives, parse everything, diagnose. Raises ParseError
    when an input cannot be opened at all (the CLI exits 2)."""
    from ingest.bundle import expand
    if rules is None:
        from rules.loader import load_rule_dirs
        rules = load_rule_dirs([rules_dir] if rules_dir else None)
    with tempfile.TemporaryDirectory(prefix="tracedoc-") as tmp:
        tmp = Path(tmp)
        with expand(paths, tmp / "unpacked") as members:
            results = [_parse_with_progress(m, tmp, show_progress) for m in members]
            return diagnose(results, rules=rules, clock_offsets=members.clock_offsets,
                            warnings=members.warnings)


def _parse_with_progress(member, workdir: Path, show: bool) -> ArtifactResult:
    if not show:
        return parse_one(member.name, member.path, workdir)
    from tqdm import tqdm
    with tqdm(desc=member.name[-40:], unit=" events", unit_scale=True, leave=False,
              file=__import__("sys").stderr) as bar:
        def progress(n: int) -> None:
            bar.update(n - bar.n)
        return parse_one(member.name, member.path, workdir, progress=progress)
