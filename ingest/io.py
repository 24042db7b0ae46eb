"""Opening untrusted artifacts: transparent gzip with a bound on what decompresses."""
from __future__ import annotations

import gzip
import io
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Callable, Iterator

GZIP_MAGIC = b"\x1f\x8b"
HEAD_BYTES = 64 * 1024
# A decompression bomb stops here; raise it for legitimately huge traces via settings.
MAX_DECOMPRESSED = 8 * 1024**3


class BoundedReader(io.RawIOBase):
    """Wraps a stream and refuses to yield more than `limit` bytes."""

    def __init__(self, raw, limit: int, path: str):
        self.raw, self.limit, self.path, self.done = raw, limit, path, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self.raw.readinto(b)
        self.done += n or 0
        if self.done > self.limit:
            from ingest.events import ParseError
            raise ParseError(self.path, f"decompressed byte {self.limit:,}",
                             "decompressed size over the limit (possible decompression bomb)")
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

    def __init__(self, path: Path, callback: Callable[[int], None]):
        self.file, self.callback = open(path, "rb", buffering=0), callback

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self.file.readinto(b)
        if n:
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


def open_bytes(path: Path | str, limit: int = MAX_DECOMPRESSED):
    """A buffered binary stream of the artifact's content, gunzipped if it is gzip."""
    path = Path(path)
    on_read = _ON_READ.get()
    if is_gzip(path):
        if on_read is None:
            return io.BufferedReader(BoundedReader(gzip.open(path, "rb"), limit, str(path)), 1 << 20)
        counted = io.BufferedReader(_CountingFile(path, on_read), 1 << 20)
        unzipped = gzip.GzipFile(fileobj=counted, mode="rb")
        unzipped.myfileobj = counted  # closed with it, as gzip.open() does with the file it opens
        return io.BufferedReader(BoundedReader(unzipped, limit, str(path)), 1 << 20)
    if on_read is None:
        return open(path, "rb")
    return io.BufferedReader(_CountingFile(path, on_read), 1 << 20)


def read_head(path: Path | str, n: int = HEAD_BYTES) -> bytes:
    """The first n bytes of content (decompressed); b'' for a damaged gzip header.

    A gzip file whose whole content is shorter than n bytes is checked for its end-of-stream
    marker: a truncated one is a ParseError naming the compressed size, since no parser can
    make sense of half a file (larger files are checked by their parser as it streams)."""
    from ingest.events import ParseError
    path = Path(path)
    truncated = ParseError(path.name, f"compressed byte {path.stat().st_size:,}",
                           "a complete gzip stream; it ends early (the file is truncated)")
    try:
        with open_bytes(path) as f:
            head = f.read(n)
    except EOFError:
        raise truncated from None
    except OSError:
        return b""
    if len(head) < n and is_gzip(path) and not _gzip_complete(path):
        raise truncated
    return head


def _gzip_complete(path: Path) -> bool:
    """Does the (small) gzip file end with its end-of-stream marker?"""
    import zlib
    inflater = zlib.decompressobj(wbits=31)
    try:
        inflater.decompress(path.read_bytes())
    except zlib.error:
        return False
    return inflater.eof


def read_all(path: Path | str, limit: int = MAX_DECOMPRESSED) -> bytes:
    """Whole content, at most `limit` bytes (compressed or not), with gzip errors turned into
    a ParseError naming the offset."""
    from ingest.events import ParseError
    path = Path(path)
    if not is_gzip(path) and path.stat().st_size > limit:  # gzip: BoundedReader counts
        raise ParseError(str(path), f"byte {limit:,}", f"a file of at most {limit:,} bytes")
    try:
        with open_bytes(path, limit) as f:
            return f.read()
    except EOFError:
        raise ParseError(str(path), "end of file", "a complete gzip stream (the file is truncated)")
    except gzip.BadGzipFile as e:
        raise ParseError(str(path), "gzip header", f"a valid gzip stream ({e})")
    except ParseError:
        raise
    except Exception as e:  # zlib.error and friends
        raise ParseError(str(path), "gzip stream", f"a readable gzip stream ({e})")


def decode_json(data: bytes, path: Path | str, expected: str = "complete JSON", hint: str = ""):
    """orjson.loads; a syntax error becomes a ParseError naming the byte, line and column."""
    import orjson

    from ingest.events import ParseError
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ParseError(str(path), f"byte {e.pos} (line {e.lineno}, column {e.colno})",
                         f"{expected} ({e.msg}){hint}") from None
