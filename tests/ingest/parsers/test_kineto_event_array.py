"""A trace whose top level is the event array itself (the trace-event format's JSON Array
Format: early torch.autograd.profiler exports, chrome://tracing captures) parses as a Kineto /
Chrome trace, also without its closing `]` and after a trailing comma, which that format
allows (issue 33). The fixtures are catapult's real chrome://tracing test traces (SOURCES.md)."""
import gzip
import json

import pytest

from cli.main import main
from ingest.engine import kineto_ranges
from ingest.engine.events import ParseError
from ingest.engine.io import read_head
from ingest.engine.parsers import detect
from ingest.engine.parsers.kineto import decode, trace
from tests.corpus import ROOT
from tests.ingest.parsers.helpers import parse_with

FIXTURES = ROOT / "tests" / "fixtures" / "captures" / "chrome_trace_array"
X_EVENTS = FIXTURES / "catapult_x_event_trace.json.gz"
B_E_EVENTS = FIXTURES / "catapult_trivial_trace.json"


def _events() -> list[dict]:
    return json.loads(gzip.decompress(X_EVENTS.read_bytes()))


def _body() -> bytes:
    """The fixture's content between its `[` and its `]`."""
    text = gzip.decompress(X_EVENTS.read_bytes()).strip()
    assert text[:1] == b"[" and text[-1:] == b"]"
    return text[1:-1].strip()


ENDINGS = {  # how a writer may leave the array's end
    "closed": b"]\n",
    "no closing bracket": b"",
    "trailing comma": b",\n",
    "trailing comma then bracket": b",\n]",
}


def test_sniffed_as_kineto_not_as_a_log_or_an_unknown_document():
    assert trace.sniff(read_head(X_EVENTS), X_EVENTS.name)
    assert detect(X_EVENTS) is trace
    assert detect(B_E_EVENTS) is trace


def test_an_array_of_other_objects_is_not_a_trace(tmp_path):
    path = tmp_path / "readings.json"
    path.write_text(json.dumps([{"sensor": "a", "ph": 7.1, "ts": 1}, {"sensor": "b", "ph": 6.8, "ts": 2}]))
    assert not trace.sniff(read_head(path), path.name)


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_every_event_is_read_whatever_the_end(tmp_path, ending):
    events = _events()
    path = tmp_path / "trace.json"
    path.write_bytes(b"[" + _body() + ENDINGS[ending])
    df, report = parse_with(trace, path)
    assert report.meta["trace_events"] == len(events) == 4027
    assert report.meta["layout"].startswith("event array")
    assert report.meta["array_closed"] is (ending in ("closed", "trailing comma then bracket"))
    complete = [e for e in events if e["ph"] == "X"]
    rows = df[df.name.isin({e["name"] for e in complete})]
    assert len(rows) >= len(complete) == 2799
    longest = max(complete, key=lambda e: e["dur"])
    row = rows[rows.name == longest["name"]]
    assert (row.dur == longest["dur"] * 1000).any()


def test_many_windows_without_the_end(tmp_path):
    """Larger than the reader's window: the array's end is closed in the last window only."""
    path = tmp_path / "big.json"
    copies = decode.WINDOW_BYTES // len(_body()) + 2
    path.write_bytes(b"[" + b",\n".join([_body()] * copies) + b",\n")
    _, report = parse_with(trace, path)
    assert report.meta["trace_events"] == 4027 * copies and report.meta["array_closed"] is False
    # no trace object to rebuild around a byte range: a bare array is parsed whole, never fanned out
    assert kineto_ranges.plan_ranges(path, decode.WINDOW_BYTES) == []


def test_what_follows_the_array_and_a_cut_array_are_refused(tmp_path):
    after = tmp_path / "after.json"
    after.write_bytes(b"[" + _body() + b']\n{"more": 1}')
    with pytest.raises(ParseError, match="nothing after the ']'"):
        parse_with(trace, after)
    cut = tmp_path / "cut.json"
    body = _body()
    cut.write_bytes(b"[" + body[:len(body) // 2])
    with pytest.raises(ParseError, match=r"expected complete JSON \(a closed traceEvents array\); got the end of the data"):
        parse_with(trace, cut)


def test_the_b_e_form_pairs_its_ranges():
    df, report = parse_with(trace, B_E_EVENTS)
    assert report.meta["trace_events"] == 4
    assert sorted(zip(df.name, df.dur)) == [("a", 36_000), ("b", 2_000)]


@pytest.mark.parametrize("ending", ["closed", "no closing bracket"])
def test_tracedoc_diagnose_reads_it(tmp_path, capsys, ending):
    path = tmp_path / "chrome_trace.json"
    path.write_bytes(b"[" + _body() + ENDINGS[ending])
    code = main(["diagnose", "-q", "--format", "json", str(path)])
    out, _ = capsys.readouterr()
    report = json.loads(out)
    (artifact,) = report["trace"]["artifacts"]
    assert code == 0 and artifact["format"] == "kineto" and not artifact.get("error")
    assert artifact["events"] == 3576
