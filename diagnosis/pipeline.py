"""The whole diagnosis in-process: files -> events -> findings -> report.

The CLI calls `run()`, which parses into in-memory Arrow tables and diagnoses them
(nothing written and read back); the Celery tasks call `parse_one()` per artifact and then
`diagnose()` on the stored Parquet files. Both build the same event frame (`load_events`),
so both paths give the same report.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pandas as pd
import pyarrow as pa

from ingest.events import SCHEMA, ParseError, ParseReport
from ingest.parse import parse_artifact
from ingest.progress import overall_done


@dataclass
class ArtifactResult:
    name: str                      # path inside the trace (bundle-relative)
    format: str = ""
    events: int = 0
    warnings: list[str] = field(default_factory=list)
    error: str = ""                # set when the file was unusable
    parquet: Path | None = None
    meta: dict = field(default_factory=dict)
    table: pa.Table | None = field(default=None, repr=False, compare=False)  # events kept in memory (CLI)
    internal_error: bool = False   # `error` is a tracedoc bug, not bad input (CLI exit 3)

    def to_report(self) -> dict:
        entry = {"path": self.name, "format": self.format or "unknown", "events": self.events,
                 "warnings": self.warnings + ([self.error] if self.error else [])}
        if self.internal_error:
            entry["internal_error"] = True
        return entry


def parse_one(name: str, path: Path, workdir: Path,
              progress: Callable[[int], None] | None = None) -> ArtifactResult:
    """Parse one file to its Parquet file; an unusable file gives a result with `error`, never
    an exception (see `_contained`)."""
    out = Path(workdir) / (_safe_stem(name) + ".parquet")

    def parse() -> ArtifactResult:
        report: ParseReport = parse_artifact(Path(path), out, artifact_id=name, name=name, progress=progress)
        return ArtifactResult(name=name, format=report.format, events=report.events,
                              warnings=report.summary_warnings(), parquet=out, meta=report.meta)
    return _contained(name, parse)


def _contained(name: str, parse: Callable[[], ArtifactResult]) -> ArtifactResult:
    """One file's parse with its failures kept on its result: an unusable file is `error`; a
    parser bug (or storage, the Parquet writer) is flagged `internal_error` too, so one file
    cannot take the diagnosis of the others down."""
    from ingest.parse import InternalParseError
    try:
        return parse()
    except InternalParseError as e:
        return ArtifactResult(name=name, error=str(e), internal_error=True)
    except ParseError as e:
        return ArtifactResult(name=name, error=str(e))
    except Exception as e:  # outside the parser: still not this trace's fault
        what = f"{type(e).__name__}: {e}"[:300]
        return ArtifactResult(name=name, internal_error=True,
                              error=f"{name}: internal error while parsing ({what}): a tracedoc bug, not a "
                                    "problem with the file; the other files were still diagnosed")


def _safe_stem(name: str) -> str:
    import hashlib
    import re
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[-80:]
    return f"{stem}.{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def load_events(artifacts: Iterable[ArtifactResult],
                clock_offsets: dict[str, int] | None = None) -> tuple[pd.DataFrame, list[dict]]:
    """All artifacts' events on one clock, as one DataFrame sorted by time, and the
    alignment that was applied (one entry per artifact, shown in the report).

    Name-like columns stay categorical (each distinct string once) and the free-text
    columns (attrs, loc, ids) stay Arrow strings: no Python object per row. Tables parsed in
    memory (`ArtifactResult.table`) are handed over, not copied: afterwards the results no
    longer hold them (parse again to diagnose again)."""
    from ingest.align import apply_alignment, describe_plans, plan_alignment
    artifacts = list(artifacts)
    tables = {a.name: _events_table(a) for a in artifacts
              if a.table is not None or (a.parquet and a.parquet.exists())}
    for a in artifacts:
        a.table = None  # handed over: each parsed table's memory goes once the frame has its rows
    if not tables:
        return event_frame(SCHEMA.empty_table()), []
    metas = {a.name: a.meta for a in artifacts}
    plans = plan_alignment(tables, metas, clock_offsets)  # once: it reads every table's time range
    alignment = describe_plans(plans)
    aligned = list(apply_alignment(tables, plans).values())
    tables.clear()
    # the list is the only reference: each column's old copy goes as its sorted copy is made
    merged = [pa.concat_tables(aligned, promote_options="permissive") if len(aligned) > 1 else aligned[0]]
    del aligned
    return event_frame(_sorted_by_time(merged)), alignment


def _events_table(artifact: ArtifactResult) -> pa.Table:
    if artifact.table is not None:
        return artifact.table
    import pyarrow.parquet as pq  # the service's path only
    return pq.read_table(artifact.parquet, schema=SCHEMA)


BIG_COLUMN_BYTES = 16 << 20


def _sorted_by_time(holder: list[pa.Table]) -> pa.Table:
    """The table (taken out of `holder`) sorted by ts (stable), each column in one chunk.

    Column by column, each made one chunk first: a take across the many chunks of a parsed
    table is ~10x slower on strings, and one column at a time bounds the extra memory."""
    table = holder.pop().unify_dictionaries()  # one dictionary per column: chunks concatenate as codes
    ts = table.column("ts").to_numpy()
    order = None if len(ts) < 2 or bool((ts[1:] >= ts[:-1]).all()) else pa.array(np.argsort(ts, kind="stable"))
    schema, columns = table.schema, table.columns
    del table, ts
    pool = pa.default_memory_pool()
    pool.release_unused()  # what parsing freed, before the copies below
    for i in range(len(columns)):
        # one chunk even when already sorted: later row selections (pandas masks) take rows,
        # and a take across many chunks is slow too
        whole = columns[i].combine_chunks()
        big = whole.nbytes > BIG_COLUMN_BYTES
        columns[i] = None  # the chunks go before the sorted copy is made: at most 2x one column
        if big:
            pool.release_unused()  # ... really: the allocator would keep their pages a while
        columns[i] = whole if order is None else whole.take(order)
        del whole
    return pa.Table.from_arrays(columns, schema=schema)


def _arrow_strings(arrow_type: pa.DataType):
    return pd.ArrowDtype(pa.string()) if arrow_type == pa.string() else None


def event_frame(table: pa.Table) -> pd.DataFrame:
    """The event table as pandas: dictionary columns -> Categorical (sharing one dictionary
    per column), string columns -> Arrow-backed strings (no per-row Python objects)."""
    table = table.unify_dictionaries()
    return table.to_pandas(types_mapper=_arrow_strings, split_blocks=True, self_destruct=True)


StageCallback = Callable[[str, float], None]


def _no_stage(stage: str, done: float) -> None:
    pass


def diagnose(artifacts: list[ArtifactResult], rules=None, clock_offsets: dict[str, int] | None = None,
             warnings: list[str] | None = None, slos=None, on_stage: StageCallback | None = None) -> dict:
    """Report (DESIGN.md "Interfaces") for parsed artifacts. `on_stage(stage, done)` hears
    each stage of the diagnosis as it starts (`done`: the share of the diagnosis before it)."""
    from diagnosis.report import build_report
    stage = on_stage or _no_stage
    stage("events", 0.0)
    events, alignment = load_events(artifacts, clock_offsets)
    report = build_report(artifacts, events, rules=rules, alignment=alignment, slos=slos, on_stage=on_stage)
    report["trace"]["warnings"] = list(warnings or [])
    extents = _extents(events)
    for entry in report["trace"]["artifacts"]:
        entry["start_ts"], entry["end_ts"] = extents.get(entry["path"], (None, None))
    return report


def _extents(events: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """Each artifact's first and last time on the common clock (rows without a time ignored)."""
    ts, dur = events["ts"].to_numpy(), events["dur"].to_numpy()
    timed = ts > 0
    if not timed.any():
        return {}
    artifact = events["artifact"]
    if isinstance(artifact.dtype, pd.CategoricalDtype):  # per artifact code, not per row string
        codes, names = artifact.cat.codes.to_numpy(), artifact.cat.categories
    else:
        codes, names = pd.factorize(artifact.to_numpy())
    grouped = pd.DataFrame({"code": codes[timed], "ts": ts[timed], "end": ts[timed] + dur[timed]}) \
        .groupby("code").agg(start=("ts", "min"), end=("end", "max"))
    return {str(names[code]): (int(r.start), int(r.end)) for code, r in grouped.iterrows() if code >= 0}


def run(paths: list[str | Path], rules_dir: str | Path | None = None, rules=None,
        show_progress: bool = False) -> dict:
    """CLI entry: expand folders/archives, parse everything, diagnose. Raises ParseError
    when an input cannot be opened at all (the CLI exits 2).

    The parsed events stay in memory (no Parquet written and read back)."""
    from ingest.bundle import expand
    _no_huge_pages()
    if rules is None:
        from rules.loader import load_rule_dirs
        rules = load_rule_dirs([rules_dir] if rules_dir else None)
    with tempfile.TemporaryDirectory(prefix="tracedoc-") as tmp:
        with expand(paths, Path(tmp) / "unpacked") as members, _ProgressBar(members, show_progress) as bar:
            results = [parse_in_memory(m.name, Path(m.path), bar.parsing(m)) for m in members]
            return diagnose(results, rules=rules, clock_offsets=members.clock_offsets,
                            warnings=members.warnings, on_stage=bar.stage)


def _no_huge_pages() -> None:
    """Transparent huge pages off for this process (Linux; nothing elsewhere).

    Arrow's allocator (mimalloc) and numpy ask for huge pages for large buffers; where the
    kernel compacts memory to find them (`defrag` = madvise, a common default) a busy host
    stalls each first touch: sorting the 90 MB attrs column of a 150 MB trace cost 1.3-2 s of
    system time for 0.05 s of work (bench/README.md). A diagnosis touches each buffer a few
    times and lives seconds: small pages cost it nothing measurable."""
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(41, 1, 0, 0, 0)  # PR_SET_THP_DISABLE
    except (OSError, AttributeError, TypeError):
        pass


def parse_in_memory(name: str, path: Path,
                    progress: Callable[[int, int], None] | None = None) -> ArtifactResult:
    """parse_one without the Parquet file: the events stay in `table` for a diagnosis in
    this process."""
    from ingest.parse import parse_to_table

    def parse() -> ArtifactResult:
        report, table = parse_to_table(Path(path), artifact_id=name, name=name, progress=progress)
        return ArtifactResult(name=name, format=report.format, events=report.events,
                              warnings=report.summary_warnings(), meta=report.meta, table=table)
    return _contained(name, parse)


class _ProgressBar:
    """The CLI's tqdm bar on stderr: bytes of each file read while parsing, then the
    diagnosis stages (one bar, in percent of the whole run)."""

    def __init__(self, members, show: bool):
        self.show, self.bar = show, None  # the bar exists inside the `with` only
        self.total = sum(_size(m.path) for m in members)
        self.before = 0  # bytes of the files already parsed

    def __enter__(self) -> "_ProgressBar":
        if self.show:
            import sys
            from tqdm import tqdm
            self.bar = tqdm(total=100, unit="%", leave=False, file=sys.stderr,
                            bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed}")
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()

    def parsing(self, member) -> Callable[[int, int], None] | None:
        if self.bar is None:
            return None
        before, size = self.before, _size(member.path)
        self.before += size
        self._show(overall_done(before, self.total), f"parsing {member.name[-40:]}")

        def progress(events: int, read: int) -> None:
            self._show(overall_done(before + min(read, size), self.total))
        return progress

    def stage(self, stage: str, done: float) -> None:
        if self.bar is not None:
            self._show(overall_done(self.total, self.total, done), stage)

    def _show(self, fraction: float, desc: str | None = None) -> None:
        """Move the bar; a new description is drawn at once (a stage may be long and the bar
        still), a move alone when tqdm's refresh interval allows."""
        n = round(100 * fraction)
        if desc is not None and desc != self.bar.desc:
            self.bar.n = n
            self.bar.set_description_str(desc)
        elif n != self.bar.n:
            self.bar.update(n - self.bar.n)


def _size(path) -> int:
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0
