"""The compiled window scanner (ingest/engine/parsers/kineto/_scan.c) against msgspec.

The scanner is a fast path: with it and without it a Kineto trace must give the same table,
the same report and the same errors. Checked on every corpus trace, on random traces full
of the values it hands back to msgspec (escapes, odd types, big numbers, non-UTF-8 bytes,
nested and repeated keys), and on damaged windows: whatever it accepts, msgspec accepts.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pytest

from ingest.engine.events import EventSink, ParseError, ParseReport
from ingest.engine.parsers.kineto import decode, scan, trace
from tests.fuzz import oracles
from tests.fuzz.targets import replay
from tests.ingest.parsers.test_kineto import IDS, KINETO_FILES
from tests.support.native import require_built



@pytest.fixture(autouse=True)
def _scanner_built():
    require_built(scan._scan, "the scanner extension (ingest/engine/parsers/kineto/_scan.c)")


def parse_table(path: Path) -> tuple[pa.Table | None, dict]:
    """The parsed table and what the report says (or the error)."""
    batches: list = []
    sink = EventSink("artifact", trace.SOURCE, batches.append)
    report = ParseReport(format=trace.FORMAT)
    try:
        trace.parse(path, sink, report)
    except ParseError as e:
        return None, {"error": str(e)}
    sink.flush()
    table = pa.Table.from_batches(batches) if batches else None
    return table, {"warnings": report.warnings, "skipped": dict(report.skipped),
                   "meta": repr(report.meta)}  # repr: key order too (the report keeps it)


def both_ways(path: Path, monkeypatch) -> tuple[tuple, tuple]:
    scanned = parse_table(path)
    with monkeypatch.context() as m:
        m.setattr(scan, "_scan", None)  # every window through msgspec
        decoded = parse_table(path)
    return scanned, decoded


def assert_same(path: Path, monkeypatch) -> pa.Table | None:
    (table, said), (want_table, want_said) = both_ways(path, monkeypatch)
    assert said == want_said
    assert (table is None) == (want_table is None)
    if table is not None:
        assert table.schema == want_table.schema
        for name in table.column_names:
            assert table.column(name).combine_chunks().equals(want_table.column(name).combine_chunks()), name
    return table


@pytest.fixture
def small_windows(monkeypatch):
    """Windows of 16 KiB: many windows per trace, so one odd value falls back alone."""
    monkeypatch.setattr(decode, "WINDOW_BYTES", 16 << 10)
    monkeypatch.setattr(decode, "CUT_SPAN", 2 << 10)


@pytest.mark.parametrize("path", KINETO_FILES, ids=IDS)
def test_every_corpus_trace_gives_the_table_msgspec_gives(path, small_windows, monkeypatch, corpus_dir):
    assert assert_same(path, monkeypatch) is not None


def test_the_scanner_takes_the_windows_of_a_corpus_trace(corpus_dir):
    chunks = list(decode.TraceReader(corpus_dir / "h200" / "healthy_decode" / "kineto_trace.json.gz").chunks())
    assert chunks and all(c.columns is not None for c in chunks)


ODD_VALUES = [
    None, True, 0, -1, 7, 2**62, 2**63, -(2**63) - 1, 2**70, 1.5, -0.0, 1e300, "3", "stream 7", "",
    "é", "a\"b", "tab\there", "\u2603", [1, 2], {"x": {"y": [1]}},
]


def random_event(rng: random.Random, i: int, odd: float = 0.15) -> dict:
    """An event of a random kind; with probability `odd` an odd value where the table reads."""
    r = rng.random()
    ev: dict = {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 7}", "pid": 1, "tid": 1,
                "ts": 1000.0 + i + rng.random(), "dur": rng.random() * 3, "args": {"External id": i}}
    if r < 0.25:  # a kernel and its launch
        ev.update(cat="kernel", name=rng.choice(["gemm", "ncclKernel_AllReduce", "k\\n\u00e9"]), pid=0, tid=7,
                  args={"correlation": i, "device": 0, "stream": 7})
    elif r < 0.4:
        ev.update(cat="cuda_runtime", name="cudaLaunchKernel", args={"correlation": i - 1})
    elif r < 0.5:
        ev.update(ph="i", cat="cpu_instant_event", name=rng.choice(["[memory]", "[OutOfMemory]"]), dur=None,
                  args={"Bytes": rng.choice([512, -512, 1.5, "9"]), "Device Id": 0, "Device Type": 1})
    elif r < 0.55:
        ev.update(ph=rng.choice(["s", "f", "M", "C", "B", "E", "Q"]))
        if ev["ph"] == "C":
            ev["args"] = {"value": rng.random()}
    if rng.random() < odd:  # an odd value somewhere the table reads
        key = rng.choice(["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"])
        ev[key] = rng.choice(ODD_VALUES)
    if rng.random() < odd and isinstance(ev.get("args"), dict):
        key = rng.choice(["correlation", "device", "stream", "External id", "Bytes", "Device Id"])
        ev["args"][key] = rng.choice(ODD_VALUES)
    if rng.random() < odd / 3:
        del ev[rng.choice(list(ev))]
    return ev


def write_trace(path: Path, events: list, rng: random.Random) -> Path:
    text = json.dumps({"schemaVersion": 1, "traceEvents": events}, ensure_ascii=rng.random() < 0.5,
                      indent=rng.choice([None, 1]))
    data = text.encode()
    if rng.random() < 0.2:  # text the scanner hands back: a repeated key, an escaped key, a bad byte
        spot = rng.choice([b'"tid": ', b'"tid":'])
        data = data.replace(spot, rng.choice([b'"pid": 3, ', b'"p\\u0069d": 3, ', b'"x": "\xff", ']) + spot, 1)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("seed", range(30))
def test_random_traces_give_the_table_msgspec_gives(seed, small_windows, monkeypatch, tmp_path):
    rng = random.Random(seed)
    odd = rng.choice([0.0, 0.002, 0.02, 0.15])  # from every window scanned to most handed back
    events = [random_event(rng, i, odd) for i in range(rng.randrange(200, 1500))]
    assert_same(write_trace(tmp_path / "t.json", events, rng), monkeypatch)


def window(events: list) -> bytes:
    return json.dumps(events).encode()


@pytest.mark.parametrize("text", [
    b'[{"ph":"X","ph":"i"}]',             # repeated key: msgspec keeps the last
    b'[{"p\\u0068":"X"}]',                 # an escaped key may spell a known one
    b'[{"name":"\\ud83d\\ude00"}]',        # surrogates
    b'[{"args":{"device":1,"device":2}}]',
    b'[{"a":' + b"[" * 300 + b"]" * 300 + b"}]",  # deeper than the scanner goes
    b'[{"ph":"X"}] x',                     # text after the array
    b'[{"ph":"X"},]', b'[1]', b'[{"a":01}]', b'[{"a":1.}]', b'[{"a":-}]', b'[{"a":"\x01"}]',
    b'[{"a":tru}]', b'[{"a":"\\x"}]', b'[{"a" 1}]', b'[{"ph":"X"}',
])
def test_the_scanner_leaves_to_msgspec_what_it_is_not_sure_of(text):
    assert scan._scan.scan(text) is None


def test_tags_and_texts_of_one_event():
    n, spans, columns, long_digits, _ = scan._scan.scan(
        b' [ {"ph" : "X", "name": "a\\"b", "pid": -3, "ts": 1.5e3, "cat": null,'
        b' "args": {"device": 7, "x": [{"device": 5}]}} ] ')
    keys = dict(zip(scan._scan.KEYS, columns))
    assert n == 1
    assert keys["ph"][0] == bytes([scan.STR]) and keys["ph"][2] == b"X"
    assert keys["name"][0] == bytes([scan.ESC]) and keys["name"][2] == b'a\\"b'
    assert keys["pid"][0] == bytes([scan.INT]) and keys["pid"][2] == b"-3"
    assert keys["ts"][0] == bytes([scan.FLOAT]) and keys["ts"][2] == b"1.5e3"
    assert keys["cat"][0] == bytes([scan.NULL]) and keys["tid"][0] == bytes([scan.ABSENT])
    assert keys["args"][2] == b'{"device": 7, "x": [{"device": 5}]}'
    assert keys["device"][2] == b"7"  # the args object's own key, not the nested one
    assert long_digits == b"\x00"


@pytest.mark.parametrize("args,flagged", [
    ('{"a": 1234567890123456789}', True), ('{"a": "x1234567890123456789"}', True),  # strings too
    ('{"a": 123456789012345678}', False), ('{"a": 0.1234567890123456789}', False),
    ('[1.5, 12345678901234567890123]', True), ('{"a": -12345678901234567890}', True)])
def test_args_with_digit_runs_that_may_pass_int64_are_flagged(args, flagged):
    found = scan._scan.scan(f'[{{"ph": "X", "args": {args}}}, {{"ph": "X", "args": {{}}}}]'.encode())
    assert found[3] == bytes([flagged, False])


_RAWS = msgspec.json.Decoder(list[msgspec.Raw])


def test_what_the_scanner_accepts_msgspec_accepts():
    """Damaged windows (bytes dropped, doubled or replaced): none the scanner takes is one
    msgspec refuses, and a window both take has the same number of events."""
    rng = random.Random(5)
    base = window([random_event(rng, i) for i in range(40)])
    accepted = 0
    for _ in range(3000):
        data = bytearray(base)
        for _ in range(rng.randrange(1, 3)):
            at = rng.randrange(len(data))
            op = rng.random()
            if op < 0.4:
                del data[at]
            elif op < 0.7:
                data[at:at] = data[at:at + 1]
            else:
                data[at] = rng.choice(b'{}[],:"\\0123456789.eE-+ ntfu\x00\xff')
        found = scan._scan.scan(bytes(data))
        if found is None:
            continue
        accepted += 1
        assert len(_RAWS.decode(bytes(data))) == found[0]
    assert accepted > 100  # damage inside strings and numbers still leaves valid JSON often


def test_the_digit_run_flag_matches_a_byte_by_byte_count():
    """The scanner samples every 19th byte; a plain count over every byte must agree."""
    rng = random.Random(3)
    for _ in range(5000):
        body = "".join(rng.choice("0123456789.a" if rng.random() < 0.3 else "0123456789")
                       for _ in range(rng.randrange(0, 120)))
        args = f'{{"a": "{body}"}}'.encode()
        assert scan._scan.scan(b'[{"args": ' + args + b"}]")[3] == bytes([oracles.has_long_digits(args)])


def test_integers_parsed_by_the_scanner_are_exact_within_int64_and_flagged_beyond():
    """pid, tid and the args keys come with their int64 values: -1 where absent or null; an
    integer beyond int64, a float or a string is not exact (Python decodes those)."""
    cases = [("0", 0, True), ("-0", 0, True), ("7", 7, True), (str(2**63 - 1), 2**63 - 1, True),
             (str(-(2**63)), -(2**63), True), (str(2**63), -1, False), (str(-(2**63) - 1), -1, False),
             ("123456789012345678901234", -1, False), ("1.5", -1, False), ("1e3", -1, False),
             ('"7"', -1, False), ("true", -1, False), ("null", -1, True), ("[1]", -1, False)]
    events = ",".join(f'{{"pid": {text}, "args": {{"stream": {text}}}}}' for text, _, _ in cases)
    n, _, _, _, numbers = scan._scan.scan(f"[{events}, {{}}]".encode())
    parsed = dict(zip(scan._scan.KEYS, numbers))
    assert parsed["ph"] is None and parsed["args"] is None and parsed["ts"] is None  # not integer keys
    for key in ("pid", "stream"):
        values, exact = (np.frombuffer(b, t) for b, t in zip(parsed[key], (np.int64, np.bool_)))
        assert values.tolist() == [v for _, v, _ in cases] + [-1], key  # the last event: absent
        assert exact.tolist() == [e for _, _, e in cases] + [True], key
    assert parsed["tid"] is not None and np.frombuffer(parsed["tid"][0], np.int64).tolist() == [-1] * n


def test_python_names_the_keys_the_scanner_reads():
    assert scan._scan.KEYS == ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args") + scan.ARG_KEYS
    assert set(scan.ARG_KEYS) == set(trace._ARG_FIELDS)


def test_python_and_the_oracle_name_the_tags_of_the_scanner():
    assert (scan.ABSENT, scan.NULL, scan.STR, scan.ESC, scan.INT, scan.FLOAT, scan.BOOL, scan.OBJ, scan.ARR) == (
        oracles.ABSENT, oracles.NULL, oracles.STR, oracles.ESC, oracles.INT, oracles.FLOAT, oracles.BOOL,
        oracles.OBJ, oracles.ARR)


# Issue 29: scan() cut its outputs to size (a reallocation) and then parsed the integers of
# pid, tid and the args keys through the pointers of before: under AddressSanitizer a
# heap-use-after-free on a 3-event window; in the normal build, integers read back wrong
# (-1 for 0) once the freed blocks were reused.

def test_the_integers_of_a_three_event_window_are_read_from_live_memory():
    n, _, _, _, numbers = scan._scan.scan(b'[{"pid": 0, "tid": 1}, {"pid": 2}, {"args": {"stream": 7}}]')
    parsed = {key: np.frombuffer(bytes(values), np.int64).tolist()
              for key, (values, _) in ((k, v) for k, v in zip(scan._scan.KEYS, numbers) if v is not None)}
    assert n == 3
    assert parsed["pid"] == [0, 2, -1] and parsed["tid"] == [1, -1, -1] and parsed["stream"] == [-1, -1, 7]


def small_valid_window(rng: random.Random) -> bytes:
    """1 to 6 valid events whose integers (0 often) the scanner parses itself."""
    ints = [0, 0, 1, -1, 7, 2**31, 2**63 - 1, -(2**63), None, "3", 1.5]
    events = []
    for i in range(rng.randrange(1, 7)):
        ev = {"ph": "X", "name": f"k{i}"}
        for key in ("pid", "tid"):
            if rng.random() < 0.8:
                ev[key] = rng.choice(ints)
        if rng.random() < 0.8:
            ev["args"] = {key: rng.choice(ints) for key in scan.ARG_KEYS if rng.random() < 0.5}
        events.append(ev)
    return json.dumps(events, indent=rng.choice([None, 1])).encode()


def test_many_small_windows_give_the_integers_msgspec_gives():
    """Windows scanned back to back, as the reader does, so freed blocks are reused at once:
    every pid, tid and args id as msgspec decodes it (tests/fuzz/oracles.py compares every
    output of the scanner, not only the integers)."""
    rng = random.Random(29)
    windows = [small_valid_window(rng) for _ in range(1000)]
    assert all(oracles.check_scan(scan._scan, w) for w in windows)  # every one taken, every value the same


def test_every_seed_of_the_fuzz_corpus_passes_the_oracle_with_the_installed_build():
    assert replay(scan._scan, "kineto_scan") >= 10
