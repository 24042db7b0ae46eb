"""Tiny-line logs are bounded by what their lines cost, not by their bytes:

* a gzip of 32 M two-byte lines (64 MiB, 65 KB compressed: under the 64 MiB byte floor, so the
  100:1 ratio never applied) is refused by the line ratio of the decompression bound, at once;
* a plain log of more lines than TRACEDOC_MAX_LOG_EVENTS keeps that many events and says
  first among its warnings that the rest was not read (never silently), and the trace goes on."""
from __future__ import annotations

import gzip
from types import SimpleNamespace

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ingest.engine.events import EventSink, ParseReport
from ingest.engine.parse import parse_to_table, run_parser
from ingest.tasks import parse_trace
from ingest.uploads import create_trace
from tests.ingest.hostile import MIB, parse_isolated

pytestmark = pytest.mark.timeout(180)


def test_a_65kb_gzip_of_32m_tiny_lines_is_refused_at_once(tmp_path):
    path = tmp_path / "tiny.log.gz"
    path.write_bytes(gzip.compress(b"a\n" * (32 * MIB), compresslevel=9))
    assert path.stat().st_size < 70_000
    cost = parse_isolated("tiny.log.gz", path, timeout=120)
    assert cost["events"] == 0
    assert cost["error"].startswith("tiny.log.gz: decompressed line ")
    assert "lines per compressed byte" in cost["error"]
    assert "TRACEDOC_MAX_LINES_PER_COMPRESSED_BYTE" in cost["error"]
    assert "internal error" not in cost["error"]
    # before: 33.5 M events, past 900 s and 2.9 GB in the probe
    assert cost["seconds"] < 10, cost
    assert cost["peak_mib"] < 600, cost


def test_more_lines_than_the_event_bound_keep_the_bound_and_say_so(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEDOC_MAX_LOG_EVENTS", "5000")
    path = tmp_path / "tiny.log"
    path.write_bytes(b"a\n" * 20_000)
    report, table = parse_to_table(path, "tiny", "tiny.log")
    assert table.num_rows == 5000 == report.events
    assert report.warnings[0] == ("at most 5,000 events per artifact (TRACEDOC_MAX_LOG_EVENTS); after line 5000: "
                                  "the rest of the file was not read")
    assert report.meta["events_limit"] == {"limit": 5000, "setting": "TRACEDOC_MAX_LOG_EVENTS",
                                           "stopped": "after line 5000"}


def test_the_event_bound_warning_survives_many_other_warnings(tmp_path):
    """The bound's warning comes first, so the cut after ParseReport.MAX_WARNINGS never hides it."""
    def parse(path, sink, report):
        for n in range(1, 1000):
            report.warn(f"line {n}: odd")
            sink.emit(ts=n, kind="log", name="x", loc=f"line {n}")
    parser = SimpleNamespace(FORMAT="log", SOURCE="log", parse=parse)
    report = ParseReport(format="log")
    sink = EventSink("a", "log", lambda batch: None, limit=300, limit_setting="TRACEDOC_MAX_LOG_EVENTS")
    run_parser(parser, tmp_path / "a.log", sink, report, "a.log")
    assert sink.count == 300 and len(report.warnings) == ParseReport.MAX_WARNINGS + 2
    assert report.warnings[0] == ("at most 300 events per artifact (TRACEDOC_MAX_LOG_EVENTS); after line 300: "
                                  "the rest of the file was not read")


def test_a_capped_log_in_a_trace_is_done_with_the_warning(infra, alice, no_worker, monkeypatch):
    monkeypatch.setenv("TRACEDOC_MAX_LOG_EVENTS", "1000")
    trace = create_trace(infra, alice, [SimpleUploadedFile("tiny.log", b"x\n" * 5000)])
    parse_trace(trace.pk)
    trace.refresh_from_db()
    artifact = trace.artifacts.get()
    assert artifact.error == "" and artifact.event_count == 1000
    assert artifact.warnings[0].startswith("at most 1,000 events per artifact (TRACEDOC_MAX_LOG_EVENTS)")
    assert trace.state == "parsed", trace.error  # then diagnosed (no worker in this test)
