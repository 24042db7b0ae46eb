"""Watching folders for new dump files: NCCL flight-recorder dumps and CUDA memory snapshots.

A dump is spooled once its size and modification time stayed the same over two polls (its
writer is done), or at once on `poll(final=True)` when the writing process has exited. A file
rewritten later (a second timeout dumps to the same name) is spooled again.
"""
from __future__ import annotations

import fnmatch
import logging
import os
from collections import Counter
from pathlib import Path
from typing import Iterable

from agent.spool import Spool

log = logging.getLogger(__name__)

DUMP_PATTERNS = ("nccl_trace_rank_*", "*.pickle")
MAX_DUMP_BYTES = 8 << 30


class DumpWatcher:
    def __init__(self, dirs: Iterable[str | Path], spool: Spool, patterns: Iterable[str] = DUMP_PATTERNS,
                 include_existing: bool = False, max_bytes: int = MAX_DUMP_BYTES):
        self.dirs = [Path(d).expanduser() for d in dirs]
        self.spool, self.patterns, self.max_bytes = spool, tuple(patterns), max_bytes
        self.last_seen: dict[Path, tuple[int, int]] = {}  # path -> (size, mtime_ns) at the last poll
        self.spooled: dict[Path, tuple[int, int]] = {}    # path -> what was spooled
        self.times_spooled: Counter[str] = Counter()
        if not include_existing:
            self.spooled = dict(self._scan())

    def _scan(self) -> Iterable[tuple[Path, tuple[int, int]]]:
        for d in self.dirs:
            try:
                entries = list(os.scandir(d))
            except OSError:
                continue  # not there (yet)
            for e in entries:
                if e.is_file(follow_symlinks=False) and any(fnmatch.fnmatch(e.name, p) for p in self.patterns):
                    st = e.stat(follow_symlinks=False)
                    yield Path(e.path), (st.st_size, st.st_mtime_ns)

    def poll(self, final: bool = False) -> list[Path]:
        """Spool the dumps that are complete; returns their paths."""
        done = []
        current = dict(self._scan())
        for path, sig in current.items():
            if self.spooled.get(path) == sig:
                continue
            if not final and self.last_seen.get(path) != sig:
                continue  # new or still growing: look again next poll
            if sig[0] > self.max_bytes:
                log.warning("dump %s is %s bytes, over the %s-byte bound: not shipped", path,
                            f"{sig[0]:,}", f"{self.max_bytes:,}")
            else:
                self._spool(path)
                done.append(path)
            self.spooled[path] = sig
        self.last_seen = current
        return done

    def _spool(self, path: Path) -> None:
        self.times_spooled[path.name] += 1
        n = self.times_spooled[path.name]
        stream = f"dumps/{path.name}" if n == 1 else f"dumps/{n}/{path.name}"
        try:
            self.spool.add_file(stream, path)
        except OSError as e:
            log.warning("cannot read dump %s: %s", path, e)
            return
        log.info("spooled dump %s", path)
