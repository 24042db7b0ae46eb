"""Following log files (like `tail -F`) into the spool.

Each poll reads what was appended to every file matching the globs, and spools whole lines as
chunks of the stream `logs/<absolute path>`. Rotation (the path now names another file) drains
the old file to its end first, then follows the new one from its start; truncation restarts
from the start. Files present at the first poll are followed from their end unless
`from_start`; files that appear later are read whole. Reads are bounded per file and poll.
"""
from __future__ import annotations

import glob
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterable

from agent.spool import Spool, safe_stream

log = logging.getLogger(__name__)

MAX_READ = 8 << 20      # bytes read per file per poll; the rest waits for the next poll
MAX_PARTIAL = 1 << 20   # a "line" longer than this is spooled without waiting for its newline
MAX_FILES = 256


@dataclass
class _Followed:
    file: BinaryIO
    inode: int
    partial: bytes = b""


class LogTailer:
    def __init__(self, globs: Iterable[str], spool: Spool, from_start: bool = False,
                 max_read: int = MAX_READ, max_files: int = MAX_FILES):
        self.globs, self.spool, self.from_start = list(globs), spool, from_start
        self.max_read, self.max_files = max_read, max_files
        self.followed: dict[str, _Followed] = {}
        self._first_poll = True
        self._warned_too_many = False

    def _matching(self) -> list[str]:
        paths = sorted({os.path.abspath(p) for g in self.globs for p in glob.glob(os.path.expanduser(g), recursive=True)
                        if os.path.isfile(p)})
        if len(paths) > self.max_files and not self._warned_too_many:
            self._warned_too_many = True
            log.warning("%d files match the log globs; following the first %d", len(paths), self.max_files)
        return paths[:self.max_files]

    def poll(self) -> int:
        """Spool what was appended since the last poll; returns the number of bytes spooled."""
        spooled = 0
        matching = self._matching()
        for path in set(self.followed) | set(matching):
            spooled += self._poll_one(path)
        self._first_poll = False
        return spooled

    def _poll_one(self, path: str) -> int:
        data = b""
        followed = self.followed.get(path)
        try:
            current = os.stat(path)
        except FileNotFoundError:
            current = None
        if followed and (current is None or current.st_ino != followed.inode):
            data += self._read(followed, until_eof=True)  # rotated or removed: finish the old file
            followed.file.close()
            del self.followed[path]
            followed = None
        if current is not None and followed is None:
            followed = self._open(path)
        if followed is not None:
            if os.fstat(followed.file.fileno()).st_size < followed.file.tell():
                log.warning("%s was truncated; following it from its start", path)
                followed.file.seek(0)
                followed.partial = b""
            data += self._read(followed)
        if data:
            self.spool.add_chunk(stream_name(path), data)
        return len(data)

    def _open(self, path: str) -> _Followed | None:
        try:
            f = open(path, "rb")
        except OSError as e:
            log.warning("cannot follow %s: %s", path, e)
            return None
        if self._first_poll and not self.from_start:
            f.seek(0, os.SEEK_END)
        followed = self.followed[path] = _Followed(f, os.fstat(f.fileno()).st_ino)
        return followed

    def _read(self, followed: _Followed, until_eof: bool = False) -> bytes:
        """Whole lines appended since the last read; an unfinished last line waits in `partial`."""
        data = followed.partial + followed.file.read(None if until_eof else self.max_read)
        if until_eof:
            followed.partial = b""
            return data
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) > MAX_PARTIAL:
            cut = len(data)
        followed.partial = data[cut:]
        return data[:cut]

    def flush(self) -> None:
        """At the end of a capture: spool everything left, unfinished last lines too."""
        for path, followed in self.followed.items():
            if rest := self._read(followed, until_eof=True):
                self.spool.add_chunk(stream_name(path), rest)

    def close(self) -> None:
        for followed in self.followed.values():
            followed.file.close()
        self.followed.clear()


def stream_name(path: str | Path) -> str:
    """The stream (and archive member) a followed file's lines go to."""
    return safe_stream("logs/" + os.path.abspath(path))
