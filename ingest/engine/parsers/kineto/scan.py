"""A window of traceEvents as columns, through the compiled scanner (`_scan.c`).

msgspec builds one Python object per event and per field (~1.2 µs an event, half the whole
diagnosis); the scanner hands back, per key the event table reads, one type tag per event
and the value texts back to back, which Arrow turns into columns (the integer keys come
parsed to int64, with an exact flag each). It runs in the read-ahead thread (`scan`); the
columns are made where the rows are built (`Scanned.columns`). Values it cannot take as
they are (escaped strings, odd types, numbers out of range) are decoded one by one with
msgspec, so a column is exactly what msgspec's typed `Event` would give. A window the
scanner does not accept, or one with a value msgspec would refuse, comes back None: the
caller decodes it with msgspec (`decode.TraceReader`), which says what is wrong with it.

Without a C compiler at install time the module is missing and every window goes through
msgspec: slower, the same table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.engine.row_copy import take_texts

try:
    from ingest.engine.parsers.kineto import _scan
except ImportError:  # built without a compiler (the extension is optional in pyproject.toml)
    _scan = None  # type: ignore[assignment]  # the stub's module or, without the extension, None

# type tags (`enum` in _scan.c)
ABSENT, NULL, STR, ESC, INT, FLOAT, BOOL, OBJ, ARR = range(9)
_STRINGS = np.array([t in (ABSENT, NULL, STR, ESC) for t in range(256)])
_NUMBERS = np.array([t in (ABSENT, NULL, INT, FLOAT) for t in range(256)])
_INTS = np.array([t in (ABSENT, NULL, INT) for t in range(256)])
_SCALARS = np.array([t in (ABSENT, NULL, STR, ESC, INT, FLOAT) for t in range(256)])  # int|float|str|None
# the args keys the scanner reads (after the 8 top-level ones in `_scan.KEYS`): trace._ARG_FIELDS
ARG_KEYS = ("correlation", "device", "stream", "External id", "Bytes", "Device Id", "Device Type")


class NotScannable(Exception):
    """A value msgspec's typed decode would refuse or read differently: decode with msgspec."""


@dataclass
class Texts:
    """One key's values in a window: a type tag and a text per event (a string's inside,
    anything else as written; empty where absent or null); for the integer keys the scanner
    parses, the numbers too (`ints`)."""
    tags: np.ndarray       # uint8 per event
    texts: pa.BinaryArray  # null where absent or null
    numbers: np.ndarray | None = None  # int64 per event: the integer, -1 where absent or null
    exact: np.ndarray | None = None    # bool per event: absent, null or an integer within int64

    def take(self, idx: np.ndarray) -> "Texts":
        if self.numbers is None:
            return Texts(self.tags[idx], take_texts(self.texts, idx))
        assert self.exact is not None  # set with numbers
        return Texts(self.tags[idx], take_texts(self.texts, idx), self.numbers[idx], self.exact[idx])

    def values(self) -> list[Any]:
        """The Python values msgspec would give (None where absent or null), one by one:
        for the rare columns the vectorised paths below do not take."""
        out: list[Any] = []
        try:
            for tag, text in zip(self.tags.tolist(), self.texts.to_pylist()):
                if tag in (ABSENT, NULL):
                    out.append(None)
                elif tag in (STR, ESC):
                    out.append(msgspec.json.decode(b'"' + text + b'"'))
                else:
                    out.append(msgspec.json.decode(text))
        except msgspec.DecodeError:  # e.g. a string that is not UTF-8
            raise NotScannable from None
        return out


@dataclass
class Columns:
    """The fields of a window's events as msgspec's typed `Event` would give them."""
    ph: pa.StringArray          # "" where absent
    cat: pa.StringArray         # null where absent or null
    name: pa.StringArray
    pid: Texts                  # int | float | str | None
    tid: Texts
    ts: np.ndarray              # NaN where absent or null
    dur: np.ndarray
    args: Texts                 # the raw args text ("" where absent), never null
    arg_keys: dict[str, Texts]  # the args keys that feed columns (absent where args is no object)
    long_digits: np.ndarray     # bool: the args text may hold an integer beyond int64
    spans: np.ndarray           # [start, end) of each event in `window`
    window: Any                 # for the few events decoded whole (counters, B/E ranges)

    def __len__(self) -> int:
        return len(self.ts)


def scan(window) -> "Scanned | None":
    """The compiled scanner over the window (`[` events `]`), outside the GIL; None: the window
    is not for it (decode it with msgspec)."""
    if _scan is None:
        return None
    found = _scan.scan(window)
    return None if found is None else Scanned(found, window)


@dataclass
class Scanned:
    """A window the scanner took, its outputs as it handed them back. `scan` runs in the
    read-ahead thread and holds the GIL twice a window, so it keeps scanning ahead while
    another thread imports (pandas, the rules); `columns` makes the Arrow columns, with
    many short holds of the GIL, in the thread that builds the rows."""
    found: tuple
    window: Any  # `[` events `]`: its last byte may have been put back since (`blob`)

    def __len__(self) -> int:
        return self.found[0]

    def blob(self) -> bytes:
        """The window as msgspec reads it: the reader wrote its `]` over the next event's
        separator only while the scanner ran."""
        return bytes(self.window[:-1]) + b"]"

    def columns(self) -> Columns | None:
        """The columns; None when a value is one msgspec's typed decode would refuse or read
        differently (decode `blob()` with msgspec)."""
        n, spans, columns, long_digits, numbers = self.found
        keys = {}
        for key, (tags, offsets, data), parsed in zip(_scan.KEYS, columns, numbers):
            tag = np.frombuffer(tags, np.uint8)
            valid = tag > (ABSENT if key == "args" else NULL)
            bitmap = None if valid.all() or key == "args" else pa.py_buffer(np.packbits(valid, bitorder="little"))
            texts = pa.Array.from_buffers(pa.binary(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)])
            keys[key] = Texts(tag, texts) if parsed is None else Texts(
                tag, texts, np.frombuffer(parsed[0], np.int64), np.frombuffer(parsed[1], np.bool_))
        try:
            if (keys["ph"].tags == NULL).any():
                raise NotScannable  # `ph: str`: null is refused
            return Columns(
                ph=strings(keys["ph"]).fill_null(""), cat=strings(keys["cat"]), name=strings(keys["name"]),
                pid=_scalars(keys["pid"]), tid=_scalars(keys["tid"]),
                ts=floats(keys["ts"]), dur=floats(keys["dur"]), args=keys["args"],
                arg_keys={k: keys[k] for k in ARG_KEYS}, long_digits=np.frombuffer(long_digits, np.bool_),
                spans=np.frombuffer(spans, np.int64).reshape(n, 2), window=self.window)
        except NotScannable:
            return None


def _scalars(t: Texts) -> Texts:
    """An `int | float | str | None` field (msgspec refuses bools, objects and arrays)."""
    if not _SCALARS[t.tags].all():
        raise NotScannable
    return t


def strings(t: Texts) -> pa.StringArray:
    """A `str | None` field (null where absent or null)."""
    if not _STRINGS[t.tags].all():
        raise NotScannable
    texts = t.texts
    if (t.tags == ESC).any():  # escapes: those strings decoded, the rest kept
        values = texts.to_pylist()
        for i in np.flatnonzero(t.tags == ESC).tolist():
            values[i] = msgspec.json.decode(b'"' + values[i] + b'"').encode()
        texts = pa.array(values, pa.binary())
    try:
        return texts.cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8
        raise NotScannable from None


def floats(t: Texts) -> np.ndarray:
    """A `float | None` field: NaN where absent or null."""
    if not _NUMBERS[t.tags].all():
        raise NotScannable
    try:
        out = pc.cast(t.texts.cast(pa.string()), pa.float64())
    except pa.ArrowInvalid:
        raise NotScannable from None
    values = out.to_numpy(zero_copy_only=False)
    if not np.isfinite(values[t.tags > NULL]).all():  # msgspec: "Number out of range"
        raise NotScannable
    return values


def ints(t: Texts, rows: np.ndarray | None = None) -> np.ndarray | None:
    """An integer field as int64 (-1 where absent or null) when every value is an integer
    within int64; None when some are not (the caller takes `values()`). `rows`: of those
    rows only. Read-only where the scanner parsed them."""
    if t.numbers is not None:
        assert t.exact is not None  # set with numbers
        if rows is None:
            return t.numbers if t.exact.all() else None
        return t.numbers[rows] if t.exact[rows].all() else None
    if rows is not None:
        t = t.take(rows)
    if not _INTS[t.tags].all():
        return None
    try:
        out = pc.cast(t.texts.cast(pa.string()), pa.int64())
    except (pa.ArrowInvalid, OverflowError):
        return None
    return out.fill_null(-1).to_numpy(zero_copy_only=False, writable=True)
