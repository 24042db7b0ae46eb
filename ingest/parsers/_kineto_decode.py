"""Typed, chunked decoding of a Kineto (PyTorch profiler) JSON trace with msgspec.

The document is read once; `traceEvents` is split into raw per-event slices (no copy,
no dicts), and the slices are decoded chunk by chunk into small typed Structs, so only
one chunk of Python objects is alive at a time. Typed `args` are decoded only for the
events whose args feed columns (GPU activity, runtime calls, memory events). A chunk that
does not fit the types (a broken event) is decoded event by event, and only the broken
events are skipped.
"""
from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import msgspec

from ingest.events import ParseError
from ingest.io import MAX_DECOMPRESSED, is_gzip, open_bytes

CHUNK_EVENTS = 65_536

Number = int | float | str | None  # untrusted files put odd types in numeric fields


class Args(msgspec.Struct, rename={
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


class Event(msgspec.Struct):
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


def read_content(path: Path) -> bytes:
    """Whole (gunzipped) content; a damaged or truncated gzip names the byte reached."""
    if not is_gzip(path):
        if path.stat().st_size > MAX_DECOMPRESSED:
            raise ParseError(str(path), f"byte {MAX_DECOMPRESSED:,}", "a trace under the size limit")
        return path.read_bytes()  # one allocation of the known size
    with open_bytes(path) as f:
        chunks, done = [], 0
        try:
            while block := f.read(16 << 20):
                chunks.append(block)
                done += len(block)
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as e:
            what = "truncated gzip stream" if isinstance(e, EOFError) else f"damaged gzip stream ({e})"
            raise ParseError(str(path), f"decompressed byte {done:,} (file size {path.stat().st_size:,})",
                             f"a complete gzip stream: {what}") from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _json_error(path: Path, data: bytes, e: Exception, what: str) -> ParseError:
    msg = str(e)
    where = f"byte {len(data):,} (end of data)" if "truncated" in msg else "JSON"
    return ParseError(str(path), where, f"{what}; the decoder said: {msg}")


@dataclass
class Document:
    meta: dict[str, msgspec.Raw]
    events: list[msgspec.Raw]


def split_document(path: Path, data: bytes) -> Document:
    """Top-level keys as raw values, traceEvents as one raw slice per event."""
    try:
        top = _TOP.decode(data)
    except msgspec.ValidationError as e:
        raise ParseError(str(path), "byte 0", f"a JSON object with traceEvents ({e})") from None
    except msgspec.DecodeError as e:
        raise _json_error(path, data, e, "complete JSON (a Kineto trace object)") from None
    raw_events = top.pop("traceEvents", None)
    if raw_events is None:
        raise ParseError(str(path), "top-level object", "a 'traceEvents' array (Kineto trace)")
    try:
        events = _RAW_LIST.decode(raw_events)
    except msgspec.ValidationError as e:
        raise ParseError(str(path), "traceEvents", f"an array of events ({e})") from None
    return Document(top, events)


def _join(raws: list[msgspec.Raw]) -> bytes:
    return b"[" + b",".join(raws) + b"]"


@dataclass
class Chunk:
    start: int                 # index of the first event in traceEvents
    events: list[Event]
    index: list[int] | None    # traceEvents index per event when some were skipped
    long_digits: bool          # some number of 19+ digits: may not fit int64


# digits -> "0", everything else -> " ": a run of 19 zeros is a 19-digit number
_DIGIT_MAP = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"0" * 19


def has_long_digits(data: bytes) -> bool:
    return data.translate(_DIGIT_MAP).find(_LONG_RUN) >= 0


def iter_chunks(doc: Document, broken: list[tuple[int, str]]) -> Iterator[Chunk]:
    """Typed chunks; events that fail to decode are appended to `broken` (index, reason)."""
    raws_all = doc.events
    for start in range(0, len(raws_all), CHUNK_EVENTS):
        raws = raws_all[start:start + CHUNK_EVENTS]
        blob = _join(raws)
        try:
            yield Chunk(start, _EVENTS.decode(blob), None, has_long_digits(blob))
            continue
        except msgspec.DecodeError:
            pass
        del blob
        events, index, kept = [], [], []
        for i, raw in enumerate(raws, start):
            try:
                events.append(_ONE_EVENT.decode(raw))
            except msgspec.DecodeError as e:
                broken.append((i, str(e)))
                continue
            index.append(i)
            kept.append(raw)
        yield Chunk(start, events, index, any(has_long_digits(bytes(r)) for r in kept))


def decode_args(raws: list[bytes]) -> list[Args | None]:
    """The typed args of some events (one decoder call); odd-typed args come back None."""
    try:
        return _ARGS.decode(_join(raws))
    except msgspec.DecodeError:
        out = []
        for raw in raws:
            try:
                out.append(_ONE_ARGS.decode(raw))
            except msgspec.DecodeError:
                out.append(None)  # the event stays; its args only in attrs
        return out
