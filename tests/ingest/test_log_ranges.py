"""ingest.engine.log_ranges: a text log parsed as byte ranges (several workers) gives the rows, order,
line numbers, warnings and clock of one parse of the whole file."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from ingest.engine.events import SCHEMA
from ingest.engine.log_ranges import consistent, finish, parse_range, plan_ranges
from ingest.engine.parsers.logs.year import year_hint
from ingest.engine.parse import parse_to_table
from ingest.engine.parsers import detect
from tests.corpus import CORPUS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TEXT = ("*.log", "*.txt", "*.out", "*.err")


def text_logs() -> list[Path]:
    found = []
    for root in (CORPUS, FIXTURES):
        for pattern in TEXT:
            found += [p for p in root.rglob(pattern) if p.is_file() and p.stat().st_size > 2000]
    return sorted(p for p in found if detect(p, p.name).FORMAT == "log")


def in_ranges(path: Path, part_bytes: int, warmup_bytes: int, name: str = "x.log"):
    hint = year_hint(path)
    ranges = plan_ranges(path, part_bytes, warmup_bytes)
    batches: list[pa.RecordBatch] = []
    outcomes = [parse_range(path, r, name, hint.year, batches.append) for r in ranges]
    why = consistent(outcomes)
    report = finish(outcomes, name, hint.year, batches.append, hint.source)
    return ranges, why, report, pa.Table.from_batches(batches, schema=SCHEMA)


def assert_same(path: Path, part_bytes: int, warmup_bytes: int) -> int:
    whole_report, whole = parse_to_table(path, "x.log", "x.log")
    ranges, why, report, table = in_ranges(path, part_bytes, warmup_bytes)
    assert not why, why
    assert table.to_pylist() == whole.to_pylist()
    assert (report.events, report.warnings, report.meta["clock"]) == \
        (whole_report.events, whole_report.warnings, whole_report.meta["clock"])
    return len(ranges)


def test_the_plan_cuts_after_newlines_and_counts_lines(tmp_path):
    path = tmp_path / "a.log"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(1, 1001)))
    ranges = plan_ranges(path, 500, 200)
    data = path.read_bytes()
    assert len(ranges) > 5 and ranges[-1].last and not any(r.last for r in ranges[:-1])
    assert [r.start for r in ranges[1:]] == [r.end for r in ranges[:-1]] and ranges[-1].end == len(data)
    for r in ranges:
        assert data[r.start:].startswith(b"line %d\n" % r.first_line)
        assert data[r.warm_start:].startswith(b"line %d\n" % r.warm_line)
        assert r.warm_start == 0 or r.start - r.warm_start >= 200


@pytest.mark.parametrize("path", text_logs(), ids=lambda p: p.name)
def test_every_corpus_log_in_small_ranges_parses_as_a_whole(path):
    size = path.stat().st_size
    assert assert_same(path, max(256, size // 7), size) >= 2  # warm-up back to the start: always consistent


def test_a_tiled_log_in_ranges_with_a_bounded_warm_up(tmp_path):
    """The corpus's NCCL timeout log (held watchdog rows, process-group state, tracebacks)
    tiled 40 times, parsed in 64 KiB ranges with a 32 KiB warm-up."""
    tile = (FIXTURES / "h200_rerun" / "nccl_timeout" / "rank0.log").read_bytes()
    path = tmp_path / "big.log"
    path.write_bytes(tile * 40)
    assert assert_same(path, 64 << 10, 32 << 10) >= 8


def test_a_too_short_warm_up_is_detected_not_merged(tmp_path):
    """A traceback cut by a range start with no warm-up: the digests differ, the caller then
    parses the whole file."""
    path = tmp_path / "tb.log"
    body = "".join(f"  File \"x.py\", line {i}, in f\n    call()\n" for i in range(200))
    path.write_text("2024-01-01 00:00:00 ERROR boom\nTraceback (most recent call last):\n" + body
                    + "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    _, why, _, _ = in_ranges(path, 2000, 0)
    assert "warm-up too short" in why


TRACEBACK = ("Traceback (most recent call last):\n  File \"train.py\", line 12, in step\n    loss.backward()\n"
             "RuntimeError: CUDA error: an illegal memory access was encountered\n")
PLAIN = "2024-01-01 00:00:{s:02d} INFO step {i} done\n"


def test_one_early_traceback_does_not_make_every_later_warm_up_too_short(tmp_path):
    """The last traceback is kept until the next (for a chained one): a range that never reads
    it joins up though its warm-up did not see it."""
    path = tmp_path / "early.log"
    path.write_text(TRACEBACK + "".join(PLAIN.format(s=i % 60, i=i) for i in range(20_000)))
    assert assert_same(path, 64 << 10, 4 << 10) >= 8


def test_a_chained_exception_whose_first_traceback_is_before_the_warm_up_is_detected(tmp_path):
    path = tmp_path / "chained.log"
    filler = "".join(PLAIN.format(s=i % 60, i=i) for i in range(3000))
    path.write_text(TRACEBACK + filler + "\nDuring handling of the above exception, another exception occurred:\n\n"
                    + TRACEBACK + filler)
    ranges, why, _, _ = in_ranges(path, 100 << 10, 4 << 10)
    assert len(ranges) >= 2 and "last_traceback_loc" in why and "warm-up too short" in why
    assert assert_same(path, 100 << 10, 1 << 20) >= 2  # a warm-up back to the first traceback joins up


def test_a_log_past_the_event_bound_is_not_merged_from_ranges(tmp_path, monkeypatch):
    """Each range stops at the whole file's event bound, and ranges that together exceed it
    are not merged: the caller parses the file whole, which keeps the first events and says
    where it stopped (ingest.engine.parse)."""
    monkeypatch.setenv("TRACEDOC_MAX_LOG_EVENTS", "300")
    path = tmp_path / "tiny.log"
    path.write_text("".join(f"x{i}\n" for i in range(1000)))
    ranges, why, _, table = in_ranges(path, 1000, 0)
    assert len(ranges) >= 4 and "more than 300 events (TRACEDOC_MAX_LOG_EVENTS)" in why
    assert table.num_rows <= 300 * len(ranges)  # no range read past the bound
    whole_report, whole = parse_to_table(path, "tiny.log", "tiny.log")
    assert whole.num_rows == 300 and "the rest of the file was not read" in whole_report.warnings[0]
