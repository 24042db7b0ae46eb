"""Differential oracles for the native code that parses uploads: what the compiled code hands
back against what msgspec (the Kineto window scanner, ingest/engine/parsers/kineto/_scan.c) or plain
Python (the row copy, ingest/engine/_gather.c) gives for the same input.

Light on imports (msgspec, numpy): the fuzz targets (tests/fuzz/targets.py) load this into a
Python run under AddressSanitizer, where the rest of the project (Arrow) is not wanted. The
extension module is passed in, so the same oracle checks the installed build and the
sanitizer build.
"""
from __future__ import annotations

import json
import re
from typing import Any

import msgspec
import numpy as np

# _scan.c's type tags (`enum`), as ingest/engine/parsers/kineto/scan.py names them
ABSENT, NULL, STR, ESC, INT, FLOAT, BOOL, OBJ, ARR = range(9)
MAX_DEPTH = 200  # _scan.c: deeper windows are left to msgspec
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MAX = 2**31 - 1
LONG_RUN = 19    # _scan.c: digits in a row that may spell an integer beyond int64

_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_MISSING = object()
# reasons the scanner gives a window back to msgspec (_scan.c's header): an escaped key, a
# \u escape of a surrogate (both found loosely here: they only excuse a refusal)
_ESCAPED_KEY = re.compile(rb'"(?:[^"\\]|\\.)*\\.(?:[^"\\]|\\.)*"\s*:')
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


class Mismatch(AssertionError):
    """The compiled code and the oracle differ on an input."""


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise Mismatch(what)


def has_long_digits(text: bytes) -> bool:
    """The scanner's long_digits flag, byte by byte: a run of LONG_RUN+ digits not after a `.`."""
    run = 0
    for i, c in enumerate(text):
        run = run + 1 if 48 <= c <= 57 else 0
        if run >= LONG_RUN and (i + 1 == run or text[i - run] != ord(".")):
            return True
    return False


# --- the Kineto window scanner ------------------------------------------------------------

def check_scan(module, window: bytes) -> bool:
    """`module.scan(window)` against msgspec's decode of the same window: every event, key,
    tag, text, span, parsed integer and flag the same, or the window refused (by both, or by
    the scanner for one of the reasons it gives one back). Raises Mismatch; returns whether
    the scanner took the window."""
    found = module.scan(window)
    try:
        raws = [bytes(r) for r in _RAWS.decode(window)]
    except msgspec.DecodeError:
        expect(found is None, "the scanner took a window msgspec refuses")
        return False
    if found is None:
        expect(_may_refuse(window, raws), "the scanner refused a window msgspec reads, for no reason it has")
        return False
    n, spans, columns, long_digits, numbers = found
    expect(n == len(raws), f"{n} events scanned, msgspec reads {len(raws)}")
    spans = np.frombuffer(bytes(spans), np.int64).reshape(n, 2)
    long_digits = bytes(long_digits)
    expect(len(long_digits) == n, "long_digits: one flag per event")
    events = []
    for i, raw in enumerate(raws):
        start, end = spans[i].tolist()
        expect(window[start:end] == raw, f"event {i}: its span is not the text msgspec reads")
        events.append(_decode_event(raw))
    args_texts: list[bytes] = []
    for k, key in enumerate(module.KEYS):
        tags, offsets, data = (bytes(b) for b in columns[k])
        offsets = np.frombuffer(offsets, np.int32)
        expect(len(tags) == n and len(offsets) == n + 1 and offsets[0] == 0 and offsets[-1] == len(data)
               and bool((np.diff(offsets) >= 0).all()), f"{key}: tags, offsets and data do not fit")
        texts = [data[offsets[i]:offsets[i + 1]] for i in range(n)]
        in_args = k > module.KEYS.index("args")  # the keys of an args object follow the top-level ones
        values = [_value_of(ev, key, in_args) for ev in events]
        for i, value in enumerate(values):
            _check_text(key, i, value, tags[i], texts[i])
        _check_numbers(key, values, numbers[k], is_int_key=in_args or key in ("pid", "tid"))
        if key == "args":
            args_texts = texts
    for i, ev in enumerate(events):
        flagged = "args" in ev and has_long_digits(args_texts[i])
        expect(long_digits[i] == flagged, f"event {i}: long_digits {long_digits[i]}, want {flagged}")
    return True


def _decode_event(raw: bytes) -> Any:
    """One event as msgspec decodes it; where msgspec refuses a value the scanner hands back
    as text (a string that is not UTF-8, a number out of float range), Python's json reads
    the same grammar, bytes kept as they are."""
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return json.loads(raw.decode("utf-8", "surrogateescape"))


def _value_of(ev: Any, key: str, in_args: bool) -> Any:
    if not isinstance(ev, dict):
        return _MISSING
    if not in_args:
        return ev.get(key, _MISSING)
    args = ev.get("args", _MISSING)
    return args.get(key, _MISSING) if isinstance(args, dict) else _MISSING


def _check_text(key: str, i: int, value: Any, tag: int, text: bytes) -> None:
    where = f"{key} of event {i}"
    if value is _MISSING:
        expect(tag == ABSENT and text == b"", f"{where}: absent, scanned as tag {tag} {text!r}")
    elif value is None:
        expect(tag == NULL and text == (b"null" if key == "args" else b""), f"{where}: null, scanned as {tag} {text!r}")
    elif key == "args" and isinstance(value, (str, dict)):  # args: the text as written, quotes and all
        expect(tag == (OBJ if isinstance(value, dict) else STR if b"\\" not in text else ESC)
               and _decode_event(text) == value, f"{where}: {text!r} is not {value!r}")
    elif isinstance(value, bool):
        expect(tag == BOOL and text == (b"true" if value else b"false"), f"{where}: {value}, scanned {tag} {text!r}")
    elif isinstance(value, str):
        expect(tag == (ESC if b"\\" in text else STR), f"{where}: string tagged {tag}")
        got = _decode_event(b'"' + text + b'"') if tag == ESC else text.decode("utf-8", "surrogateescape")
        expect(got == value, f"{where}: {got!r} is not {value!r}")
    elif isinstance(value, int):
        expect(tag == INT and int(text) == value, f"{where}: {value}, scanned {tag} {text!r}")
    elif isinstance(value, float):
        expect(tag == FLOAT and float(text) == value, f"{where}: {value}, scanned {tag} {text!r}")
    else:
        expect(tag == (OBJ if isinstance(value, dict) else ARR) and _decode_event(text) == value,
               f"{where}: {value!r}, scanned {tag} {text!r}")


def _check_numbers(key: str, values: list, parsed, is_int_key: bool) -> None:
    """pid, tid and the args keys: int64 and exact where an integer within int64; -1 and exact
    where absent or null; -1 and not exact for anything else."""
    if not is_int_key:
        expect(parsed is None, f"{key}: no integers parsed for it")
        return
    got = np.frombuffer(bytes(parsed[0]), np.int64).tolist()
    exact = np.frombuffer(bytes(parsed[1]), np.bool_).tolist()
    want = [(-1, True) if v is _MISSING or v is None else
            (v, True) if type(v) is int and INT64_MIN <= v <= INT64_MAX else (-1, False) for v in values]
    expect(list(zip(got, exact)) == want, f"{key}: integers {list(zip(got, exact))} are not {want}")


def _may_refuse(window: bytes, raws: list[bytes]) -> bool:
    """Whether the scanner may give this window (which msgspec reads) back to msgspec."""
    if any(not raw.startswith(b"{") for raw in raws):
        return True  # an event that is not an object
    if _SURROGATE.search(window) or _ESCAPED_KEY.search(window):
        return True
    for raw in raws:
        if _depth(raw) >= MAX_DEPTH - 1:
            return True
        try:
            json.loads(raw.decode("utf-8", "surrogateescape"), object_pairs_hook=_no_repeats)
        except _Repeated:
            return True  # a repeated key: msgspec keeps the last
    return False


class _Repeated(Exception):
    pass


def _no_repeats(pairs: list) -> dict:
    if len({k for k, _ in pairs}) != len(pairs):
        raise _Repeated
    return dict(pairs)


def _depth(raw: bytes) -> int:
    """Nesting of `{`/`[` outside strings."""
    depth = most = 0
    in_string = escaped = False
    for c in raw:
        if in_string:
            escaped, in_string = (False, True) if escaped else (c == 0x5C, c != 0x22)
        elif c == 0x22:
            in_string = True
        elif c in (0x7B, 0x5B):
            depth += 1
            most = max(most, depth)
        elif c in (0x7D, 0x5D):
            depth -= 1
    return most


# --- the row copy -------------------------------------------------------------------------

def take_strings_reference(out_len: int, ends_len: int, written: int, sources: list, chunk_of: list[int],
                           within: list[int], aligned: bool = True) -> tuple[int, bytes, list[int]] | str:
    """`_gather.take_strings` in plain Python: (written, the output, the row ends), or the
    reason it must refuse the arguments. `aligned`: whether every offset buffer may be read
    as int32 (a memoryview can start anywhere)."""
    if len(within) != len(chunk_of) or ends_len < len(chunk_of):
        return "differ in length"
    if written < 0 or written > out_len:
        return "written is outside the output"
    if not aligned:
        return "not aligned"
    out, ends = bytearray(out_len), []
    for k, r in zip(chunk_of, within):
        if not 0 <= k < len(sources) or sources[k] is None:
            return "a row of a dropped or missing chunk"
        offsets, data = sources[k]
        if not 0 <= r < len(offsets) - 1:
            return "a row past its chunk"
        a, b = int(offsets[r]), int(offsets[r + 1])
        if a < 0 or b < a or b > len(data):
            return "offsets outside their data"
        if written + b - a > out_len or written + b - a > INT32_MAX:
            return "more text than the output holds"
        out[written:written + b - a] = bytes(data[a:b])
        written += b - a
        ends.append(written)
    return written, bytes(out), ends


def check_take_strings(module, out_len: int, ends_len: int, written: int, sources: list,
                       chunk_of: np.ndarray, within: np.ndarray, aligned: bool = True) -> bool:
    """`module.take_strings` against the reference. Raises Mismatch; returns whether the copy
    was made."""
    want = take_strings_reference(
        out_len, ends_len, written, [None if s is None else (np.frombuffer(s[0], np.int32), s[1]) for s in sources],
        np.asarray(chunk_of).tolist(), np.asarray(within).tolist(), aligned)
    out, ends = np.zeros(out_len, np.uint8), np.zeros(ends_len, np.int32)
    try:
        got = module.take_strings(out, ends, written, sources, chunk_of, within)
    except ValueError as e:
        expect(isinstance(want, str) and want in str(e), f"refused ({e}), the reference says {want!r}")
        return False
    expect(not isinstance(want, str), f"copied, the reference refuses: {want}")
    w, want_out, want_ends = want
    expect(got == w and bytes(out) == want_out and ends[:len(want_ends)].tolist() == want_ends,
           f"copied {got} bytes, the reference {w}")
    return True
