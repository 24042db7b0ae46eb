"""Every pair of the corpus's timed artifacts, uploaded together, whatever scenario (and day)
each comes from: an artifact with full timestamps keeps them; a year-less one lands within a
day of its peer or is left unaligned with a warning; no placed artifact's span leaves the
upload's span by more than a day. (tests/acceptance/test_clock_combinations.py does the same
for each multi-rank incident's files in every combination.)"""
from __future__ import annotations

import functools
from itertools import combinations
from pathlib import Path

import pyarrow.compute as pc
import pytest

from ingest.engine.align import plan_alignment
from ingest.engine.artifact_results import parse_in_memory
from ingest.engine.clock import Clock
from tests.corpus import CORPUS

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not found")
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
DAY = 86_400 * 10**9


def timed_artifacts() -> list[Path]:
    files = sorted(p for p in (CORPUS / "h200").glob("*/*") if p.is_file() and p.suffix not in (".py", ".csv"))
    files += sorted((FIXTURES / "h200_open_world").glob("nccl_*/rank*.log"))
    return files


@functools.lru_cache(maxsize=None)
def parsed(path: Path):
    result = parse_in_memory(f"{path.parent.name}/{path.name}", path)
    return result.table, result.meta


def _span(table, offset: int) -> tuple[int, int]:
    ts = pc.filter(table.column("ts"), pc.greater(table.column("ts"), 0))
    mm = pc.min_max(ts)
    return mm["min"].as_py() + offset, mm["max"].as_py() + offset


def _is_wall_clock(meta: dict, table) -> bool:
    return table is not None and table.num_rows > 0 and Clock.from_meta(meta).domain == "unix"


def pairs() -> list[tuple[Path, Path]]:
    timed = [p for p in timed_artifacts() if _is_wall_clock(*reversed(parsed(p)))]
    return list(combinations(timed, 2))


@pytest.mark.parametrize("a,b", pairs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_pair_of_timed_artifacts_ends_on_one_clock(a: Path, b: Path):
    names = {f"a:{a.parent.name}/{a.name}": a, f"b:{b.parent.name}/{b.name}": b}
    tables = {n: parsed(p)[0] for n, p in names.items()}
    metas = {n: parsed(p)[1] for n, p in names.items()}
    plans = plan_alignment(tables, metas)
    clocks = {n: Clock.from_meta(m) for n, m in metas.items()}
    placed = {n: _span(tables[n], plans[n].offset_ns) for n in names if plans[n].aligned}
    upload = (min(lo for lo, _ in placed.values()), max(hi for _, hi in placed.values()))
    for n, plan in plans.items():
        if not clocks[n].assumptions:
            assert plan.offset_ns == 0 and plan.aligned, plan  # full timestamps are kept
        elif not plan.aligned:
            assert plan.warning and plan.offset_ns == 0, plan
        elif clocks[n].year_assumed:
            other = next(m for m in placed if m != n) if len(placed) > 1 else None
            if other is not None and other.split(":", 1)[1] in plan.evidence:
                lo, hi = placed[n]
                olo, ohi = placed[other]
                assert max(0, olo - hi, lo - ohi) <= DAY, plan  # within a day of the peer that placed it
    for n, (lo, hi) in placed.items():
        assert upload[0] - DAY <= lo and hi <= upload[1] + DAY, n
