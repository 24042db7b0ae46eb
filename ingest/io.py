"""Opening untrusted artifacts: transparent gzip with a bound on what decompresses."""
from __future__ import annotations

import gzip
import io
from pathlib import Path

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


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def open_bytes(path: Path | str, limit: int = MAX_DECOMPRESSED):
    """A buffered binary stream of the artifact's content, gunzipped if it is gzip."""
    path = Path(path)
    if is_gzip(path):
        return io.BufferedReader(BoundedReader(gzip.open(path, "rb"), limit, str(path)), 1 << 20)
    return open(path, "rb")


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
