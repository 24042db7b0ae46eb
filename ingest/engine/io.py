"""Opening untrusted artifacts: transparent gzip with a bound on what decompresses."""
from __future__ import annotations

import gzip
import io
import os
import zlib
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable, Iterator

import orjson

from ingest.engine.events import ParseError, excerpt, json_error_got

_gzip: ModuleType  # zlib-ng's reader or the standard library's (the same API)
try:
    # zlib-ng's port of the standard library's gzip reader: the same stream and errors, faster
    # inflate, and 512 KiB reads where the standard library's are 8 KiB. Each read gives the GIL
    # up and takes it back, so 8 KiB reads slowed both the prefetch thread and the parse it feeds:
    # a 10 MiB gzip trace took ~0.3 s longer to diagnose than with this reader (5 A/B pairs).
    from zlib_ng import gzip_ng as _gzip
    from zlib_ng import zlib_ng as _zlib_ng
    # (zlib_ng.pyi declares `error` an instance; it is the exception class)
    _ZLIB_ERRORS: tuple[type[Exception], ...] = (zlib.error, _zlib_ng.error)  # type: ignore[assignment]
except ImportError:  # the standard library's reader
    _gzip = gzip
    _ZLIB_ERRORS = (zlib.error,)

# What a damaged gzip stream raises while it is read: cut short, a bad header, corrupt data.
GZIP_ERRORS = (EOFError, gzip.BadGzipFile) + _ZLIB_ERRORS
GZIP_MAGIC = b"\x1f\x8b"
HEAD_BYTES = 64 * 1024
# Defaults of the decompression bound; the environment variables TRACEDOC_MAX_DECOMPRESSED_BYTES,
# TRACEDOC_MAX_DECOMPRESSION_RATIO and TRACEDOC_DECOMPRESSION_FLOOR_BYTES override them.
MAX_DECOMPRESSED = 8 * 1024**3
MAX_RATIO = 100      # real traces and logs compress 5-35:1; a gzip of blank space, 1000:1
RATIO_FLOOR = 64 * 1024**2
# Lines cost per line, whatever their length (a parser's work is per line): 64 MiB of 2-byte
# lines gzip to 65 KB, 33.5 M lines under the byte floor. Past LINE_FLOOR lines (~7 s of the
# log parser), at most LINE_RATIO lines per compressed byte (real logs: 0.05-1; at the 100:1
# byte ratio, lines of 12 bytes on average). TRACEDOC_DECOMPRESSION_FLOOR_LINES and
# TRACEDOC_MAX_LINES_PER_COMPRESSED_BYTE override them.
LINE_FLOOR = 250_000
LINE_RATIO = 8


@dataclass(frozen=True)
class DecompressionBound:
    """What one compressed stream may expand to: at most `cap` bytes in all, and past `floor`
    bytes at most `ratio` decompressed bytes per compressed byte read so far. Checked while
    reading, so a bomb stops after about `floor` bytes, not after the cap."""
    cap: int
    ratio: int
    floor: int
    line_ratio: int = LINE_RATIO
    line_floor: int = LINE_FLOOR

    @classmethod
    def from_env(cls, limit: int | None = None) -> "DecompressionBound":
        cap = env_int("TRACEDOC_MAX_DECOMPRESSED_BYTES", MAX_DECOMPRESSED)
        return cls(cap=min(cap, limit) if limit else cap,
                   ratio=env_int("TRACEDOC_MAX_DECOMPRESSION_RATIO", MAX_RATIO),
                   floor=env_int("TRACEDOC_DECOMPRESSION_FLOOR_BYTES", RATIO_FLOOR),
                   line_ratio=env_int("TRACEDOC_MAX_LINES_PER_COMPRESSED_BYTE", LINE_RATIO),
                   line_floor=env_int("TRACEDOC_DECOMPRESSION_FLOOR_LINES", LINE_FLOOR))

    def check_lines(self, path: str, lines: int, compressed: int) -> None:
        """Past `line_floor` lines, at most `line_ratio` lines per compressed byte read so far."""
        if lines > self.line_floor and lines > self.line_ratio * compressed:
            raise ParseError(path, f"decompressed line {lines:,} (compressed byte {compressed:,})",
                             f"at most {self.line_ratio} lines per compressed byte past the first "
                             f"{self.line_floor:,} lines (TRACEDOC_MAX_LINES_PER_COMPRESSED_BYTE, "
                             "TRACEDOC_DECOMPRESSION_FLOOR_LINES; a gzip of tiny lines costs per line)",
                             got=f"{lines:,} lines from {compressed:,} compressed bytes (possible decompression bomb)")

    def check(self, path: str, decompressed: int, compressed: int) -> None:
        if decompressed > self.cap:
            raise ParseError(path, f"decompressed byte {self.cap:,}",
                             f"at most {self.cap:,} decompressed bytes for this file",
                             got=f"more from {compressed:,} compressed bytes (possible decompression bomb)")
        if decompressed > self.floor and decompressed > self.ratio * compressed:
            raise ParseError(path, f"decompressed byte {decompressed:,} (compressed byte {compressed:,})",
                             f"at most {self.ratio}:1 decompression past the first {self.floor:,} bytes "
                             "(TRACEDOC_MAX_DECOMPRESSION_RATIO)",
                             got=f"{decompressed / max(compressed, 1):,.0f}:1 (possible decompression bomb)")


# a refusal's 'got' for a gzip stream cut short
TRUNCATED_GZIP = "a stream that ends early (the file is truncated)"


def env_int(name: str, default: int) -> int:
    """A bound from the environment (the engine runs without Django: the CLI, the worker and
    the web process all read the same variables)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected an integer") from None


class BoundedReader(io.RawIOBase):
    """Wraps a decompressing stream; `compressed_pos()` says how far into the stored file it
    has read. Refuses to yield more than the bound allows."""

    def __init__(self, raw, bound: DecompressionBound, path: str, compressed_pos: Callable[[], int]):
        self.raw, self.bound, self.path, self.compressed_pos = raw, bound, path, compressed_pos
        self.done = self.lines = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self.raw.readinto(b)
        self.done += n or 0
        compressed = self.compressed_pos()
        self.bound.check(self.path, self.done, compressed)
        if n:
            with memoryview(b) as view:
                self.lines += view[:n].tobytes().count(b"\n")
            self.bound.check_lines(self.path, self.lines, compressed)
        return n

    def close(self) -> None:
        if not self.closed:
            self.raw.close()  # the gzip stream and, through it, the file
        super().close()


# While parse_events() runs, every file opened with open_bytes() reports how far into the file
# (as stored: compressed bytes for a .gz) it has read: progress that means something.
_ON_READ: ContextVar[Callable[[int], None] | None] = ContextVar("tracedoc_on_read", default=None)


@contextmanager
def count_bytes_read(callback: Callable[[int], None] | None) -> Iterator[None]:
    """Within the block, files opened by open_bytes() call `callback(bytes read so far)`."""
    token = _ON_READ.set(callback)
    try:
        yield
    finally:
        _ON_READ.reset(token)


class _CountingFile(io.RawIOBase):
    """A raw file that reports its position after each read."""

    def __init__(self, path: Path, callback: Callable[[int], None] | None):
        self.file, self.callback = open(path, "rb", buffering=0), callback

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self.file.readinto(b)
        if n and self.callback is not None:
            self.callback(self.file.tell())
        return n

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self.file.seek(offset, whence)

    def tell(self) -> int:
        return self.file.tell()

    def close(self) -> None:
        if not self.closed:
            self.file.close()
        super().close()


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def open_bytes(path: Path | str, limit: int | None = None):
    """A buffered binary stream of the artifact's content, gunzipped if it is gzip (then
    bounded by DecompressionBound, `limit` lowering its cap)."""
    path = Path(path)
    on_read = _ON_READ.get()
    if is_gzip(path):
        stored = io.BufferedReader(_CountingFile(path, on_read), 1 << 20)
        unzipped = _gzip.GzipFile(fileobj=stored, mode="rb")
        unzipped.myfileobj = stored  # closed with it, as gzip.open() does with the file it opens
        bounded = BoundedReader(unzipped, DecompressionBound.from_env(limit), str(path), stored.tell)
        return io.BufferedReader(bounded, 1 << 20)
    if on_read is None:
        return open(path, "rb")
    return io.BufferedReader(_CountingFile(path, on_read), 1 << 20)


def open_stream(stored: io.BufferedReader, name: str, limit: int | None = None):
    """open_bytes for bytes already open as a buffered stream (a blob read from object storage,
    fetched as it is read): gunzipped if it is gzip, under the same decompression bound."""
    if stored.peek(2)[:2] != GZIP_MAGIC:
        return stored
    unzipped = _gzip.GzipFile(fileobj=stored, mode="rb")
    unzipped.myfileobj = stored  # closed with it
    return io.BufferedReader(BoundedReader(unzipped, DecompressionBound.from_env(limit), name, stored.tell), 1 << 20)


def read_head(path: Path | str, n: int = HEAD_BYTES) -> bytes:
    """The first n bytes of content (decompressed); b'' for a damaged gzip header.

    A gzip file whose whole content is shorter than n bytes is checked for its end-of-stream
    marker: a truncated one is a ParseError naming the compressed size, since no parser can
    make sense of half a file (larger files are checked by their parser as it streams)."""
    path = Path(path)
    truncated = ParseError(path.name, f"compressed byte {path.stat().st_size:,}",
                           "a complete gzip stream", got=TRUNCATED_GZIP)
    try:
        with open_bytes(path) as f:
            head = f.read(n)
    except EOFError:
        raise truncated from None
    except _ZLIB_ERRORS as e:  # corrupt deflate data in the head (was reported as a tracedoc bug)
        raise ParseError(path.name, "compressed byte 0", "a readable gzip stream", got=f"damaged data ({e})") from None
    except OSError:
        return b""
    if len(head) < n and is_gzip(path) and not _gzip_complete(path):
        raise truncated
    return head


def first_line(path: Path | str) -> str:
    """What a refused text file starts with, for a refusal's 'got': its first non-blank line
    (a bounded excerpt, line numbered), or that it is empty, blank or binary. Reads at most
    4 KiB of content, so its cost does not depend on the file's length."""
    try:
        head = read_head(path, 4096)
    except ParseError:
        return "a truncated gzip stream"
    if not head:
        return "an empty file"
    if b"\0" in head:
        return f"binary data {excerpt(head, 16)}"
    for number, line in enumerate(head.splitlines()[:200], 1):
        if line.strip():
            try:
                return f"line {number}: {excerpt(line.decode())}"
            except UnicodeDecodeError:
                return f"line {number}: {excerpt(line, 16)} (not UTF-8)"
    return "only blank lines"


def no_line_matched(path: Path | str) -> str:
    """A refusal's 'got' for a line format no line of the file matched."""
    return f"no such line ({first_line(path)})"


def _gzip_complete(path: Path) -> bool:
    """Does the (small) gzip file end with its end-of-stream marker?"""
    inflater = zlib.decompressobj(wbits=31)
    try:
        inflater.decompress(path.read_bytes())
    except zlib.error:
        return False
    return inflater.eof


def read_all(path: Path | str, limit: int | None = None) -> bytes:
    """Whole content, at most `limit` bytes (compressed or not; the decompression bound's cap
    when None), with gzip errors turned into a ParseError naming the offset."""
    path = Path(path)
    cap = DecompressionBound.from_env(limit).cap
    if not is_gzip(path) and path.stat().st_size > cap:  # gzip: BoundedReader counts
        raise ParseError(str(path), f"byte {cap:,}", f"a file of at most {cap:,} bytes",
                         got=f"{path.stat().st_size:,} bytes")
    try:
        with open_bytes(path, limit) as f:
            return f.read()
    except EOFError as e:
        raise ParseError(str(path), "end of file", "a complete gzip stream",
                         got=TRUNCATED_GZIP) from e
    except gzip.BadGzipFile as e:
        raise ParseError(str(path), "gzip header", "a valid gzip stream", got=f"a bad header ({e})") from e
    except ParseError:
        raise
    except Exception as e:  # zlib.error and friends
        raise ParseError(str(path), "gzip stream", "a readable gzip stream", got=f"damaged data ({e})") from e


def decode_json(data: bytes, path: Path | str, expected: str = "complete JSON", hint: str = ""):
    """orjson.loads; a syntax error becomes a ParseError naming the byte, line and column."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ParseError(str(path), f"byte {e.pos} (line {e.lineno}, column {e.colno})", expected,
                         got=json_error_got(data, e.pos, e.msg) + hint) from None
