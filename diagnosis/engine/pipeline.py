"""The whole diagnosis in-process: files -> events -> findings -> report.

The CLI calls `run()`, which parses into in-memory Arrow tables and diagnoses them
(nothing written and read back); the Celery tasks parse each artifact to Parquet
(`ingest.engine.artifact_results.parse_one`) and then call `diagnose()` on the stored files. Both
build the same event frame (`load_events`), so both paths give the same report.
"""
from __future__ import annotations

import gc
import importlib
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

import numpy as np
import pyarrow as pa

from diagnosis.engine.results import Report
from ingest.engine.align import apply_alignment, describe_plans, plan_alignment
from ingest.engine.artifact_results import ArtifactResult, parse_in_memory
from ingest.engine.bundle import expand
from ingest.engine.duplicate_profiles import find_duplicates
from ingest.engine.events import INT64_MAX, INT64_MIN, SCHEMA
from ingest.engine.stored_file import stored_file
from ingest.engine import process_memory
from ingest.engine.progress import overall_done
from ingest.engine.time_order import sorted_by_time

if TYPE_CHECKING:
    import pandas as pd
    from tqdm import tqdm

    from rules.engine.compiler import CompiledPack

# pandas and the rules engine (diagnosis.engine.report: ~0.4 s of imports) are imported where they are
# used: `run` loads them in a thread while the files parse (the parse needs neither; _WarmUp).


def load_events(artifacts: Iterable[ArtifactResult],
                clock_offsets: dict[str, int] | None = None) -> tuple[pd.DataFrame, list[dict]]:
    """All artifacts' events on one clock, as one DataFrame sorted by time, and the
    alignment that was applied (one entry per artifact, shown in the report).

    Name-like columns stay categorical (each distinct string once) and the free-text
    columns (attrs, loc, ids) stay Arrow strings: no Python object per row. Tables parsed in
    memory (`ArtifactResult.table`) are handed over, not copied: afterwards the results no
    longer hold them (parse again to diagnose again). A file holding the same events as an
    earlier one (ingest.engine.duplicate_profiles) is left out, its result's `duplicate` set."""
    artifacts = list(artifacts)
    tables = {a.name: _renamed(_events_table(a), a.name) if a.rename else _events_table(a) for a in artifacts
              if a.table is not None or (a.parquet and a.parquet.exists())}
    for a in artifacts:
        a.table = None  # handed over: each parsed table's memory goes once the frame has its rows
    # two exports of one profile (a .json and its .json.gz): the later file's events are left out,
    # and its result says so (`duplicate`), or every kernel would be counted twice
    duplicates = {d.name: d for d in find_duplicates(tables, {a.name: a.format for a in artifacts})}
    for a in artifacts:
        a.duplicate = duplicates.get(a.name)
        if a.duplicate:
            del tables[a.name]
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
    frame = event_frame(sorted_by_time(merged))
    return frame, alignment


def _events_table(artifact: ArtifactResult) -> pa.Table:
    if artifact.table is not None:
        return artifact.table
    import pyarrow.parquet as pq  # the service's path only
    assert artifact.parquet is not None  # an artifact holds its table in memory or in a Parquet file
    source = stored_file(artifact.parquet)  # a local file or an S3 object: ranged reads either way
    # The file reader, not read_table: read_table goes through pyarrow.dataset (~0.3 s to
    # import) and gives one chunk per row group, which the sort then copies again. One thread:
    # a worker process per core is the deployment, more threads only compete. From S3 the
    # column chunks are fetched ahead in coalesced ranges (pre_buffer), not one GET each.
    with source.open() as f:
        table = pq.ParquetFile(f, pre_buffer=source.remote).read(use_threads=False)
    if table.schema.equals(SCHEMA):
        return table
    # a file of an older schema: cast and fill
    return pq.read_table(source.path, filesystem=source.filesystem, schema=SCHEMA)


def _renamed(table: pa.Table, name: str) -> pa.Table:
    """Every row's `artifact` set to `name` (a dictionary column of one value: no per-row string)."""
    i = table.schema.get_field_index("artifact")
    column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(len(table), np.int32)), pa.array([name]))
    if not pa.types.is_dictionary(table.schema.field(i).type):
        column = column.cast(table.schema.field(i).type)
    return table.set_column(i, table.schema.field(i), column)


def _arrow_strings(arrow_type: pa.DataType):
    import pandas as pd  # loaded by then (see _WarmUp)
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
             warnings: list[str] | None = None, slos=None, on_stage: StageCallback | None = None,
             on_events: Callable[[pd.DataFrame], None] | None = None) -> Report:
    """Report (docs/api.md) for parsed artifacts. `on_stage(stage, done)` hears
    each stage of the diagnosis as it starts (`done`: the share of the diagnosis before it);
    `on_events(events)` gets the event table once the report is built (figures the report
    does not carry, as `tracedoc diff` measures them)."""
    from diagnosis.engine.report import build_report  # see _WarmUp
    stage = on_stage or _no_stage
    stage("events", 0.0)
    events, alignment = load_events(artifacts, clock_offsets)
    report = build_report(artifacts, events, rules=rules, alignment=alignment, slos=slos, on_stage=on_stage,
                          warnings=warnings or (), extents=_extents(events))
    if on_events is not None:
        on_events(events)
    return report


def _extents(events: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """Each artifact's first and last time on the common clock (rows without a time ignored)."""
    import pandas as pd  # loaded by then (see _WarmUp)
    ts, dur = events["ts"].to_numpy(), events["dur"].to_numpy()
    timed = ts > 0
    if not timed.any():
        return {}
    artifact = events["artifact"]
    if isinstance(artifact.dtype, pd.CategoricalDtype):  # per artifact code, not per row string
        codes, names = artifact.cat.codes.to_numpy(), artifact.cat.categories
    else:
        codes, names = pd.factorize(artifact.to_numpy())
    present = [c for c in np.unique(codes[timed]).tolist() if c >= 0]
    end = ts + dur
    if len(present) <= FEW_ARTIFACTS:  # masked reductions: no row-sized copy per step (page faults)
        spans = {}
        for c in present:
            rows = timed & (codes == c)
            spans[str(names[c])] = (int(ts.min(where=rows, initial=INT64_MAX)),
                                    int(end.max(where=rows, initial=INT64_MIN)))
        return spans
    rows = np.flatnonzero(timed & (codes >= 0))
    at = codes[rows].astype(np.int64)
    start, stop = np.full(len(names), INT64_MAX, np.int64), np.full(len(names), INT64_MIN, np.int64)
    np.minimum.at(start, at, ts[rows])  # per artifact, without a frame of the timed rows
    np.maximum.at(stop, at, end[rows])
    return {str(names[c]): (int(start[c]), int(stop[c])) for c in present}


FEW_ARTIFACTS = 16


def run(paths: list[str | Path], rules_dir: str | Path | None = None, rules=None,
        show_progress: bool = False, on_events: Callable[[pd.DataFrame], None] | None = None) -> Report:
    """CLI entry: expand folders/archives, parse everything, diagnose. Raises ParseError
    when an input cannot be opened at all (the CLI exits 2).

    The parsed events stay in memory (no Parquet written and read back)."""
    process_memory.settle()
    builtin = rules is None and not rules_dir
    engine = _WarmUp(builtin)
    if rules is None and rules_dir:
        from rules.engine.loader import load_rule_dirs  # see _WarmUp
        rules = load_rule_dirs([rules_dir])  # None: build_report takes the builtin pack
    with tempfile.TemporaryDirectory(prefix="tracedoc-") as tmp:
        with expand(paths, Path(tmp) / "unpacked") as members, _ProgressBar(members, show_progress) as bar:
            results = [parse_in_memory(m.name, Path(m.path), bar.parsing(m)) for m in members]
            engine.join()
            if builtin:
                rules = engine.pack  # None if it failed there: build_report loads it again and says why
            return diagnose(results, rules=rules, clock_offsets=members.clock_offsets,
                            warnings=members.warnings, on_stage=bar.stage, on_events=on_events)


class _WarmUp(threading.Thread):
    """The report's imports (pandas, the rules engine), the rule grammars' parsers and, for a
    diagnosis with the builtin rules, that pack compiled (`pack`), made in a thread: the
    parse spends much of its time outside the GIL (ingest.engine.prefetch), so most of this runs
    beside it. A failure is raised again where the main thread does the same."""

    def __init__(self, builtin_pack: bool):
        super().__init__(name="warm up the report", daemon=True)
        self.builtin_pack = builtin_pack
        self.pack: CompiledPack | None = None
        self.start()

    def run(self) -> None:
        try:
            importlib.import_module("diagnosis.engine.report")
            importlib.import_module("rules.engine.grammar").build_parsers()
            if self.builtin_pack:
                from rules.engine.compiler import compile_pack
                from rules.engine.loader import load_rule_dirs
                self.pack = compile_pack(load_rule_dirs(None))
        except Exception:  # noqa: BLE001 - the main thread's own call reports it
            pass
        finally:
            if not gc.isenabled():  # the CLI turned the collector off for the imports (cli.main)
                gc.freeze()  # what they made lives to the end: later passes need not walk it
                gc.enable()


class _ProgressBar:
    """The CLI's tqdm bar on stderr: bytes of each file read while parsing, then the
    diagnosis stages (one bar, in percent of the whole run)."""

    def __init__(self, members, show: bool):
        self.show = show
        self.bar: tqdm | None = None  # the bar exists inside the `with` only
        self.total = sum(_size(m.path) for m in members)
        self.before = 0  # bytes of the files already parsed

    def __enter__(self) -> "_ProgressBar":
        if self.show:
            from tqdm import tqdm  # only with a bar to draw (its import reads package metadata)
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
        assert self.bar is not None  # its callers return early without a bar
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
