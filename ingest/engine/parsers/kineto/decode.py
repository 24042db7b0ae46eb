"""Streaming, typed decoding of a Kineto (PyTorch profiler) JSON trace with msgspec.

The content is read in fixed windows and never held whole. Each window of `traceEvents`
is cut after the last `}` followed by `,{` and decoded as one array of small typed
Structs. A cut is only a candidate (the bytes may sit inside a string or a nested
object); the decoder validates it: JSON parsing is deterministic from a true event start,
so if `[` + bytes up to the cut + `]` decodes, the cut is a true event boundary, and if it
says "trailing characters", the `traceEvents` array itself ended there. Typed `args` are
decoded only for the events whose args feed columns; the rest stay raw (views into the
window). A window that does not fit the types (a broken event) is decoded event by event,
and only the broken events are skipped.

A document whose top level is the event array itself (the trace-event format's "JSON Array
Format": early `torch.autograd.profiler` exports, chrome://tracing captures) is read the same
way, with no keys around it; that format lets the array end without its `]`, after a
trailing comma (a writer stopped mid-run), so its end is closed before the last window is cut.
"""
from __future__ import annotations

import re
from collections import deque
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from io import BufferedIOBase
from pathlib import Path

import msgspec
import numpy as np

from ingest.engine.events import INT64_MAX, INT64_MIN, ParseError, describe, excerpt
from ingest.engine.io import GZIP_ERRORS, is_gzip, open_bytes
from ingest.engine.parsers.kineto.scan import Columns, Scanned, scan
from ingest.engine.prefetch import prefetched
from ingest.engine.spare_buffers import SpareBuffers, underlying

WINDOW_BYTES = 8 << 20    # content read per step: bounds the memory of one chunk
SPARE_WINDOWS = 2         # window buffers kept for reuse: one being read, one whose rows are built
TAIL_BYTES = 64 << 10     # end of content read ahead for the keys after traceEvents
MAX_TOP_BYTES = 64 << 20  # top-level content before or after traceEvents (held whole)

Number = int | float | str | None  # untrusted files put odd types in numeric fields


class Args(msgspec.Struct, gc=False, rename={
    "ext_id": "External id", "mem_bytes": "Bytes", "mem_device": "Device Id",
    "mem_device_type": "Device Type",
}):
    """The few `args` fields that feed event-table columns; the rest stays raw in attrs."""
    correlation: Number = None
    device: Number = None
    stream: Number = None
    ext_id: Number = None
    mem_bytes: Number = None
    mem_device: Number = None
    mem_device_type: Number = None


class Event(msgspec.Struct, gc=False):  # no cycles: the GC need not track 10^5 of them
    ph: str = ""
    cat: str | None = None
    name: str | None = None
    pid: int | float | str | None = None
    tid: int | float | str | None = None
    ts: float | None = None
    dur: float | None = None
    args: msgspec.Raw = msgspec.Raw(b"")


_EVENTS = msgspec.json.Decoder(list[Event])
_ARGS = msgspec.json.Decoder(list[Args | None])
_ONE_EVENT = msgspec.json.Decoder(Event)
_ONE_ARGS = msgspec.json.Decoder(Args | None)
_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])

_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")       # candidate cut: end of one event, start of the next
_ERROR_BYTE = re.compile(r"\(byte (\d+)\)")
_CLOSE_TOP = b"]}"                             # closes a header cut just after `"traceEvents": [`
_OPEN_TOP = b'{"traceEvents":['                # opens a text that starts at the `]` ending the array
CUT_TRIES = 4                                  # candidate cuts tried per window before reading more
CUT_SPAN = 1 << 20                             # candidate cuts are looked for in the window's last MiB first
_SPACE = re.compile(rb"[ \t\n\r\x0b\x0c]*")    # what bytes.lstrip() strips
_SPACE_BYTES = b" \t\n\r\x0b\x0c"
_SCAN_BRACES = 256                             # `}` looked at backwards before the regex takes over


def _last_cuts(win: bytearray | memoryview, size: int, eof: bool) -> list[int]:
    """The last CUT_TRIES candidate cuts, in order: content positions just after a `}` that
    `,{` follows, in the content's last CUT_SPAN bytes (anywhere when there are none there
    and more content may come). `win` is `[` + the content.

    Found backwards with rfind (a forward regex over a whole MiB cost more than decoding
    some windows); the matches are `_BOUNDARY.finditer`'s (they cannot overlap), so the
    windows, and the rows' order, do not depend on how they were found."""
    floor = max(0, size - CUT_SPAN) + 1
    found: list[int] = []  # win positions of the `}`, last first: content position + 1 = the cut
    end = limit = len(win)
    win = underlying(win)  # its bytes past `limit` are not this window's
    for _ in range(_SCAN_BRACES):
        i = win.rfind(b"}", floor, end) if len(found) < CUT_TRIES else -1
        if i < 0:
            break
        if _BOUNDARY.match(win, i, limit):
            found.append(i)
        end = i
    else:  # braces without cuts (a huge nested event): the regex over the span
        found = [m.start() for m in _BOUNDARY.finditer(win, floor, limit)][::-1]
    if not found and not eof and floor > 1:
        found = [m.start() for m in _BOUNDARY.finditer(win, 1, limit)][::-1]
    return found[:CUT_TRIES][::-1]


@dataclass
class Chunk:
    """The events of one window: typed `Event`s (msgspec), or `columns` when the compiled
    scanner took the window (kineto.scan); `scanned` only between the read-ahead thread and
    `TraceReader.chunks`, which turns it into one of the others."""
    start: int                 # index of the first event in traceEvents
    events: list[Event] | None
    index: list[int] | None    # traceEvents index per event when some were skipped
    columns: Columns | None = None
    scanned: Scanned | None = None

    def __len__(self) -> int:
        if self.events is not None:
            return len(self.events)
        if self.columns is not None:
            return len(self.columns)
        assert self.scanned is not None  # a chunk holds one of the three
        return len(self.scanned)

    def scanned_columns(self) -> Columns:
        """The columns of a chunk without typed events."""
        assert self.columns is not None  # TraceReader.chunks gives each chunk events or columns
        return self.columns

    def event(self, i: int) -> Event:
        """The i-th event typed (for a scanned window: decoded from its text)."""
        if self.events is not None:
            return self.events[i]
        columns = self.scanned_columns()
        start, end = columns.spans[i].tolist()
        return _ONE_EVENT.decode(columns.window[start:end])

    def first_times(self, k: int) -> list[float]:
        """The numeric ts of the first k events."""
        if self.events is None:
            ts = self.scanned_columns().ts[:k]
            return ts[np.isfinite(ts)].tolist()
        return [e.ts for e in self.events[:k] if isinstance(e.ts, (int, float))]


# digits -> "0", everything else -> " ": a run of 19 zeros is a 19-digit number
_DIGIT_MAP = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"0" * 19


def has_big_int(data: bytes) -> bool:
    """Whether an integer literal outside int64 may occur (digit runs of floats don't count)."""
    digits = data.translate(_DIGIT_MAP)
    i = digits.find(_LONG_RUN)
    while i >= 0:
        end = digits.find(b" ", i)
        end = len(data) if end < 0 else end
        before, after = data[i - 1:i], data[end:end + 1]
        if before != b"." and after not in (b".", b"e", b"E"):
            value = int(data[i:end]) * (-1 if before == b"-" else 1)
            if not INT64_MIN <= value <= INT64_MAX:
                return True
        i = digits.find(_LONG_RUN, end)
    return False


class _Content:
    """The (gunzipped) content, read forward; gzip damage names the byte reached."""

    def __init__(self, path: Path, stream: BufferedIOBase):
        self.path, self.stream, self.done = path, stream, 0
        # a window's cut leaves at most CUT_SPAN bytes of it for the next (see _last_cuts)
        self.buffers = SpareBuffers(1 + CUT_SPAN + WINDOW_BYTES, SPARE_WINDOWS)

    def read(self, n: int = -1) -> bytes:
        try:
            block = self.stream.read(n)
        except GZIP_ERRORS + (OSError,) as e:
            what = "a truncated gzip stream" if isinstance(e, EOFError) else f"a damaged gzip stream ({e})"
            raise ParseError(str(self.path), f"decompressed byte {self.done:,} (file size "
                             f"{self.path.stat().st_size:,})", "a complete gzip stream", got=what) from None
        self.done += len(block)
        return block

    def read_into(self, prefix, n: int) -> tuple[memoryview, bool]:
        """A new window: `prefix` then up to n more bytes of content, read in place (no block
        object copied into a growing buffer: a fifth of the page faults), into a spare buffer
        where one is free; and whether the content ended."""
        start = len(prefix)
        win = self.buffers.take(start + n)
        win[:start] = prefix
        got = 0
        with memoryview(win) as view:
            while got < n:
                with view[start + got:] as free:
                    k = self._readinto(free)
                if not k:
                    break
                got += k
        return win[:start + got], got == 0

    def _readinto(self, free: memoryview) -> int:
        try:
            k = self.stream.readinto(free) or 0
        except GZIP_ERRORS + (OSError,) as e:
            what = "a truncated gzip stream" if isinstance(e, EOFError) else f"a damaged gzip stream ({e})"
            raise ParseError(str(self.path), f"decompressed byte {self.done:,} (file size "
                             f"{self.path.stat().st_size:,})", "a complete gzip stream", got=what) from None
        self.done += k
        return k


def space_end(data: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """The offset after the whitespace at `pos`."""
    m = _SPACE.match(data, pos)
    assert m is not None  # it matches the empty string too
    return m.end()


def _error_byte(e: msgspec.DecodeError) -> int | None:
    m = _ERROR_BYTE.search(str(e))
    return int(m.group(1)) if m else None


def events_key_at_top(data: bytes | bytearray, start: int = 0) -> int | None:
    """The offset just past `"traceEvents": [` where that key belongs to the top-level object
    of `data` (the text before it decodes as the object's leading keys), else None."""
    for m in _EVENTS_KEY.finditer(data, start):
        try:
            _TOP.decode(data[:m.end()] + _CLOSE_TOP)
        except (msgspec.DecodeError, UnicodeDecodeError):
            continue  # the text sits inside a string or nested value, or is not UTF-8
        return m.end()
    return None


class TraceReader:
    """One pass over a Kineto trace: `chunks()` yields typed events; afterwards `header`
    and `trailer` hold the top-level keys before and after `traceEvents` (raw values),
    `broken` the (index, reason) of events that could not be decoded, `count` all events."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.header: dict[str, msgspec.Raw] = {}
        self.trailer: dict[str, msgspec.Raw] = {}
        self.broken: list[tuple[int, str]] = []
        self.count = 0
        self.bare = False          # the top level is the event array itself (no trace object)
        self.array_closed = True   # ... and it ended with its own `]`

    def _error(self, where: str, what: str, got: str) -> ParseError:
        return ParseError(str(self.path), where, what, got=got)

    def chunks(self, read_ahead: int = 0, burst: int = 0) -> Iterator[Chunk]:
        """The windows' events in order. `read_ahead`: windows read and scanned ahead in a
        thread while the caller builds rows from this one; `burst`: more at first
        (ingest.engine.prefetch)."""
        windows = self._windows() if not read_ahead else prefetched(self._windows(), read_ahead, burst)
        try:
            for chunk in windows:
                yield self._typed_chunk(chunk)
        finally:
            windows.close()

    def _typed_chunk(self, chunk: Chunk) -> Chunk:
        """A scanned window as columns, or as typed events where a value needs msgspec."""
        if chunk.scanned is None:
            return chunk
        if (columns := chunk.scanned.columns()) is not None:
            return Chunk(chunk.start, None, None, columns)
        events, index, _ = self._typed(chunk.scanned.blob(), chunk.start, None)
        return Chunk(chunk.start, events, index)

    def _windows(self) -> Generator[Chunk, None, None]:
        with open_bytes(self.path) as stream:
            content = _Content(self.path, stream)
            rest, pos = self._read_header(content)  # the bytes after traceEvents' `[`; pos: their offset
            # win = `[` + content not yet decoded: a window decodes in place (a `]` written after
            # its cut), and the typed events' raw args are views into it, never copies
            win: bytearray | memoryview = bytearray(b"[") + rest  # then a spare buffer's view
            del rest
            eof, need_more, closed = False, len(win) == 1, False
            while True:
                if need_more and not eof:
                    win, eof = content.read_into(win, WINDOW_BYTES)
                if eof and self.bare and not closed:
                    win, closed = self._close_array(win, content), True
                found = self._cut(win, pos, eof, content)
                need_more = True
                if found is None:
                    continue  # no valid cut yet: read more
                chunk, used = found
                del found
                if len(chunk) or chunk.index is not None:
                    yield chunk
                del chunk  # not kept alive while the next window decodes
                if used is None:
                    return  # the array ended; trailer read
                at = space_end(win, used + 1)  # win[used + 1]: the content's byte `used`
                if win[at:at + 1] != b",":
                    raise self._error(f"byte {pos + used:,}", "',' between events in traceEvents",
                                      excerpt(bytes(win[at:at + 21]), 20))
                pos += at
                win[at] = 0x5B  # that `,` opens the next window: `[` + the events after it
                tail = memoryview(win)[at:]  # the old window stays only as long as its events
                need_more = len(tail) - 1 < WINDOW_BYTES
                if need_more and not eof:
                    win, eof = content.read_into(tail, WINDOW_BYTES)
                    need_more = False
                else:
                    win = content.buffers.take(len(tail))
                    win[:] = tail
                del tail

    def _read_header(self, content: _Content) -> tuple[bytes, int]:
        """Top-level keys before traceEvents; returns the bytes after its `[` and their offset."""
        data = b""
        searched = 0
        while True:
            block = content.read(WINDOW_BYTES)
            data += block
            at = space_end(data)
            if data[at:at + 1] == b"[":  # the event array is the document
                self.bare = True
                return data[at + 1:], at + 1
            end = events_key_at_top(data, max(0, searched - 64))
            if end is not None:
                top = _TOP.decode(data[:end] + _CLOSE_TOP)
                top.pop("traceEvents")
                self.header = top
                return data[end:], end
            searched = len(data)
            if not block:
                raise self._whole_document_error(data)
            if searched > MAX_TOP_BYTES:
                raise self._error(f"byte {searched:,}", "a 'traceEvents' array within the first "
                                  f"{MAX_TOP_BYTES >> 20} MiB (Kineto trace)", f"none in {searched:,} bytes")

    def _close_array(self, win, content: _Content) -> memoryview:
        """A bare array's last window (`[` + the rest of the content) ending with exactly one
        `]` after its last event: the format lets the `]` go missing and a comma trail. One
        copy of the last window, at most, like the reader's own (`chunks`)."""
        end = len(win)
        while end > 1 and win[end - 1] in _SPACE_BYTES:
            end -= 1
        self.array_closed = end > 1 and win[end - 1] == 0x5D
        if self.array_closed:
            end -= 1
            while end > 1 and win[end - 1] in _SPACE_BYTES:
                end -= 1
        if end > 1 and win[end - 1] == 0x2C:  # a trailing `,`
            end -= 1
        out = content.buffers.take(end + 1)
        out[:end] = win[:end]
        out[end] = 0x5D
        return out

    def _whole_document_error(self, data: bytes) -> ParseError:
        """Why a document without a `"traceEvents": [` at its top level is unusable."""
        try:
            top = _TOP.decode(data)
        except msgspec.ValidationError as e:
            return self._error("byte 0", "a JSON object with traceEvents", f"{excerpt(data[:21], 20)} ({e})")
        except msgspec.DecodeError as e:
            return self._json_error(e, len(data), 0, "complete JSON (a Kineto trace object)")
        if "traceEvents" in top:
            return self._error("traceEvents", "an array of events",
                               excerpt(bytes(memoryview(top["traceEvents"])[:21]), 20))
        return self._error("top-level object", "a 'traceEvents' array (Kineto trace)", describe(top))

    def _json_error(self, e: msgspec.DecodeError, end: int, offset: int, what: str) -> ParseError:
        """`offset`: the absolute byte of the decoded text's first byte."""
        if "truncated" in str(e):
            return self._error(f"byte {end:,} (end of data)", what, f"the end of the data ({e})")
        at = _error_byte(e)
        where = f"byte {offset + at:,}" if at is not None else "JSON"
        return self._error(where, what, str(e))

    def _cut(self, win: bytearray | memoryview, pos: int, eof: bool, content: _Content):
        """(chunk, bytes of content used) at the last valid cut; used None when the array
        ended (trailer read); None when no cut is valid yet and more content is needed.
        `win` is `[` + the content from byte `pos` on; a cut is a position in the content."""
        size = len(win) - 1
        tries = deque(reversed(_last_cuts(win, size, eof)))
        if eof:
            tries.append(size)  # the last events, the end of the array and the trailer
        view = memoryview(win)
        for cut in tries:
            whole = cut == size  # at the end of content: no `]` added, the array's own must follow
            saved = None if whole else win[cut + 1]
            if saved is not None:
                win[cut + 1] = 0x5D  # `]` right after the cut's `}`: `[` + events + `]`, in place
            blob = view[:cut + 2]
            try:
                chunk = self._decode(blob, None)
            except msgspec.DecodeError:
                pass
            else:
                if whole and self.bare:
                    return chunk, None  # the array ended with the content
                if whole:
                    raise self._error(f"byte {content.done:,} (end of data)", "complete JSON (a closed trace object)",
                                      "the end of the data (the file is cut short)")
                assert saved is not None  # not whole
                win[cut + 1] = saved
                return chunk, cut
            try:
                raws = _RAW_LIST.decode(blob)
            except msgspec.DecodeError as e:
                at = _error_byte(e)
                if "trailing characters" in str(e):
                    assert at is not None  # msgspec names the byte where they start
                    if self.bare:
                        raise self._error(f"byte {pos + at - 2:,}", "nothing after the ']' that ends the "
                                          "array of trace events", excerpt(bytes(view[at - 1:at + 20]), 20)) from None
                    end = at - 1  # the array ended; `at` is one past that character
                    head = bytes(view[:end])
                    if saved is not None:
                        win[cut + 1] = saved
                    chunk = self._decode(head, None)
                    self._read_trailer(bytes(view[1:]), end - 1, pos, content)
                    return chunk, None
                if at is not None and at <= cut:  # up to the cut the parse is the file's own
                    raise self._json_error(e, content.done, pos - 1, "valid JSON in traceEvents") from None
                if whole:
                    raise self._json_error(e, content.done, pos - 1,
                                           "complete JSON (a closed traceEvents array)") from None
                assert saved is not None  # not whole
                win[cut + 1] = saved
                continue  # the cut sat inside a string or nested value
            if whole and self.bare:
                return self._decode(blob, raws), None
            if whole:
                raise self._error(f"byte {content.done:,} (end of data)", "complete JSON (a closed trace object)",
                                  "the end of the data (the file is cut short)")
            assert saved is not None  # not whole
            win[cut + 1] = saved
            return self._decode(blob, raws), cut
        if eof:
            raise self._error(f"byte {content.done:,} (end of data)", "complete JSON (a closed traceEvents array)",
                              "the end of the data (the file is cut short)")
        return None

    def _decode(self, blob, raws: list[msgspec.Raw] | None) -> Chunk:
        """The events of `[...]`: scanned, or typed (`_typed`); raises msgspec.DecodeError
        when the text is not a JSON array."""
        start = self.count
        if raws is None and (scanned := scan(blob)) is not None:
            self.count += len(scanned)
            return Chunk(start, None, None, scanned=scanned)
        events, index, self.count = self._typed(blob, start, raws)
        return Chunk(start, events, index)

    def _typed(self, blob, start: int, raws: list[msgspec.Raw] | None) -> tuple[list[Event], list[int] | None, int]:
        """Typed events of `[...]` (its first at traceEvents[start]), event by event where
        some are not valid events (then `index`; they go to `broken`); and the index past
        its last event. `raws`: the same array, split."""
        if raws is None:
            try:
                events = _EVENTS.decode(blob)
                return events, None, start + len(events)
            except msgspec.ValidationError:
                raws = _RAW_LIST.decode(blob)
        events, index = [], []
        for i, raw in enumerate(raws, start):
            try:
                events.append(_ONE_EVENT.decode(raw))
            except msgspec.DecodeError as e:
                self.broken.append((i, str(e)))
                continue
            index.append(i)
        return events, index, start + len(raws)

    def _read_trailer(self, buf: bytes, end: int, pos: int, content: _Content) -> None:
        """The top-level keys after the array, which ended just before buf[end]."""
        text = _OPEN_TOP + b"]" + buf[end:] + content.read(MAX_TOP_BYTES)
        if content.read(1):
            raise self._error(f"byte {content.done:,}", "the end of the trace object within "
                              f"{MAX_TOP_BYTES >> 20} MiB after traceEvents", "more")
        try:
            top = _TOP.decode(text)
        except msgspec.DecodeError as e:
            raise self._json_error(e, content.done, pos + end - len(_OPEN_TOP) - 1,
                                   "complete JSON after traceEvents (the end of the trace object)") from None
        top.pop("traceEvents")
        self.trailer = top


def peek_trailer(path: Path) -> dict[str, msgspec.Raw]:
    """The keys after traceEvents, read ahead from the end of the content: some libkineto
    versions write baseTimeNanoseconds (and distributedInfo) there, and the columns need
    them from the first event on. {} when none are found."""
    tail = _last_bytes(path, TAIL_BYTES)
    for m in re.finditer(rb"\]", tail):  # the first `]` whose rest closes the document
        try:
            top = _TOP.decode(_OPEN_TOP + tail[m.start():])
        except msgspec.DecodeError:
            continue
        top.pop("traceEvents")
        return top
    return {}


def _last_bytes(path: Path, n: int) -> bytes:
    if not is_gzip(path):
        with open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - n))
            return f.read()
    with open_bytes(path) as stream:  # gzip: no way to the end but through it
        content = _Content(path, stream)
        tail = b""
        while block := content.read(WINDOW_BYTES):
            tail = (tail + block)[-n:]
    return tail


def decode_args(raws: list[bytes]) -> list[Args | None]:
    """The typed args of some events (one decoder call); odd-typed args come back None."""
    try:
        return _ARGS.decode(b"[" + b",".join(raws) + b"]")
    except msgspec.DecodeError:
        out = []
        for raw in raws:
            try:
                out.append(_ONE_ARGS.decode(raw))
            except msgspec.DecodeError:
                out.append(None)  # the event stays; its args only in attrs
        return out
