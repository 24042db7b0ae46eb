"""The agent's on-disk spool: captured chunks, then bundles waiting to be shipped.

Layout under the root:
  tmp/       files being written; emptied at start, so a crash leaves nothing half-written elsewhere
  chunks/    captured pieces named `<time_ns>-<seq>--<stream>`. A stream is one file of the
             trace (nvml_samples.jsonl, logs/train.log, dumps/nccl_trace_rank_0) captured
             over time in pieces; a bundle joins each stream's pieces back into one file.
  outbox/    bundles `<time_ns>-<seq>.tar.gz`, each with its labels in `<time_ns>-<seq>.json`,
             shipped oldest first. The labels file also holds the bundle's idempotency key, made
             with it: every try to ship it sends the same key, so it becomes one trace however
             many tries it takes (an answer lost on the way counts as a failed try)
  rejected/  bundles the server refused for good (bad request, too large), kept to look at

Every file appears by os.replace from tmp/, so no reader ever sees half a file. The spool is
bounded: past `max_bytes`, the oldest files are dropped first, with a warning.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import re
import shutil
import tarfile
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 2 * 1024**3
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_COPY_CHUNK = 1 << 20


def safe_stream(name: str) -> str:
    """A stream name usable as a file name and an archive member: path parts of safe characters."""
    parts = [_UNSAFE.sub("_", p).lstrip(".") for p in name.replace("\\", "/").split("/")]
    parts = [p for p in parts if p]
    if not parts:
        raise ValueError(f"empty stream name: {name!r}")
    return "/".join(parts)


@dataclass(frozen=True)
class Bundle:
    path: Path         # the .tar.gz
    labels_path: Path  # its labels (JSON)

    @property
    def meta(self) -> dict:
        """{"labels": {...}, "name": ..., "streams": [...], "key": ...}"""
        return json.loads(self.labels_path.read_text())

    @property
    def key(self) -> str:
        """The idempotency key; a bundle spooled before keys existed is named by its content."""
        if key := self.meta.get("key"):
            return key
        digest = hashlib.sha256()
        with open(self.path, "rb") as f:
            while block := f.read(_COPY_CHUNK):
                digest.update(block)
        return "sha256:" + digest.hexdigest()

    @property
    def size(self) -> int:
        return self.path.stat().st_size


class Spool:
    def __init__(self, root: str | Path, max_bytes: int = DEFAULT_MAX_BYTES):
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.tmp, self.chunks = self.root / "tmp", self.root / "chunks"
        self.outbox, self.rejected = self.root / "outbox", self.root / "rejected"
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)  # logs and dumps can be sensitive
        for d in (self.tmp, self.chunks, self.outbox, self.rejected):
            d.mkdir(mode=0o700, exist_ok=True)
        for leftover in self.tmp.iterdir():  # half-written by a process that died
            _remove(leftover)
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self.dropped = 0  # files dropped to keep within max_bytes

    # -- writing ---------------------------------------------------------------------------

    def _new_name(self) -> str:
        return f"{time.time_ns():020d}-{next(self._seq):06d}"

    def _publish(self, write, dest: Path) -> Path:
        """Write through `write(file)` into tmp/, fsync, then rename into place."""
        tmp = self.tmp / dest.name
        try:
            with open(tmp, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, dest)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return dest

    def add_chunk(self, stream: str, data: bytes) -> Path | None:
        """Spool a captured piece of `stream`; nothing for empty data."""
        if not data:
            return None
        dest = self.chunks / f"{self._new_name()}--{safe_stream(stream).replace('/', '+')}"
        path = self._publish(lambda f: f.write(data), dest)
        self.enforce_bound()
        return path

    def add_file(self, stream: str, source: BinaryIO | str | Path) -> Path:
        """Spool a whole file (a dump) as one chunk, copied without holding it in memory."""
        dest = self.chunks / f"{self._new_name()}--{safe_stream(stream).replace('/', '+')}"
        if isinstance(source, (str, Path)):
            with open(source, "rb") as src:
                path = self._publish(lambda f: shutil.copyfileobj(src, f, _COPY_CHUNK), dest)
        else:
            path = self._publish(lambda f: shutil.copyfileobj(source, f, _COPY_CHUNK), dest)
        self.enforce_bound()
        return path

    def pending_chunks(self) -> list[Path]:
        return sorted(self.chunks.iterdir())

    def make_bundle(self, labels: dict[str, str], name: str = "",
                    chunks: list[Path] | None = None) -> Bundle | None:
        """Join the pending chunks (or the given ones: a window's, listed when it closed) per
        stream into one tar.gz in the outbox; None if there are none.

        The labels file is published before the bundle: a bundle in the outbox always has labels.
        """
        chunks = [c for c in (self.pending_chunks() if chunks is None else chunks) if c.exists()]
        if not chunks:
            return None
        streams: dict[str, list[Path]] = defaultdict(list)
        for c in chunks:
            streams[c.name.split("--", 1)[1].replace("+", "/")].append(c)
        bundle = self._write_bundle(streams, labels, name)
        for c in chunks:
            c.unlink(missing_ok=True)
        self.enforce_bound()
        return bundle

    def bundle_files(self, files: dict[str, Path], labels: dict[str, str], name: str = "") -> Bundle | None:
        """A bundle straight from files (stream name -> path), not from the chunks: an
        on-demand capture ships on its own, never inside a window's bundle. None if no files."""
        streams = {safe_stream(stream): [Path(p)] for stream, p in files.items()}
        if not streams:
            return None
        bundle = self._write_bundle(streams, labels, name)
        self.enforce_bound()
        return bundle

    def _write_bundle(self, streams: dict[str, list[Path]], labels: dict[str, str], name: str) -> Bundle:
        meta = {"labels": labels, "name": name, "streams": sorted(streams), "key": uuid.uuid4().hex}
        stem = self._new_name()
        labels_path = self._publish(lambda f: f.write(json.dumps(meta).encode()), self.outbox / f"{stem}.json")

        def write_tar(f):
            with tarfile.open(fileobj=f, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
                for stream, parts in sorted(streams.items()):
                    info = tarfile.TarInfo(stream)
                    info.size = sum(p.stat().st_size for p in parts)
                    info.mtime = int(parts[-1].stat().st_mtime)
                    info.mode = 0o644
                    tar.addfile(info, _Concat(parts))

        return Bundle(self._publish(write_tar, self.outbox / f"{stem}.tar.gz"), labels_path)

    # -- shipping side ---------------------------------------------------------------------

    def bundles(self) -> list[Bundle]:
        """Bundles waiting in the outbox, oldest first."""
        with self._lock:
            return [Bundle(p, p.with_name(p.name[:-len(".tar.gz")] + ".json"))
                    for p in sorted(self.outbox.glob("*.tar.gz"))]

    def remove(self, bundle: Bundle) -> None:
        with self._lock:
            bundle.path.unlink(missing_ok=True)
            bundle.labels_path.unlink(missing_ok=True)

    def reject(self, bundle: Bundle, reason: str) -> None:
        """Move a bundle the server refused for good out of the outbox, with the reason."""
        with self._lock:
            if not bundle.path.exists():
                return
            meta = json.loads(bundle.labels_path.read_text())
            meta["rejected"] = reason
            (self.rejected / bundle.labels_path.name).write_text(json.dumps(meta))
            bundle.labels_path.unlink(missing_ok=True)
            os.replace(bundle.path, self.rejected / bundle.path.name)

    # -- bounds ----------------------------------------------------------------------------

    def size(self) -> int:
        return sum(p.stat().st_size for p in self._files())

    def _files(self) -> list[Path]:
        return [p for d in (self.chunks, self.outbox, self.rejected) for p in d.iterdir()]

    def enforce_bound(self) -> int:
        """Drop the oldest files (by capture time, whatever their folder) until within max_bytes."""
        with self._lock:
            files = sorted(self._files(), key=lambda p: p.name)
            sizes = {p: _size(p) for p in files}
            total, dropped = sum(sizes.values()), 0
            for p in files:
                if total <= self.max_bytes:
                    break
                if p.suffix == ".json" and p.with_suffix(".tar.gz").exists():
                    continue  # a bundle's labels go with the bundle
                total -= sizes[p]
                p.unlink(missing_ok=True)
                if p.name.endswith(".tar.gz"):
                    labels = p.with_name(p.name[:-len(".tar.gz")] + ".json")
                    total -= sizes.get(labels, 0)
                    labels.unlink(missing_ok=True)
                dropped += 1
                log.warning("spool over %s bytes: dropped the oldest file %s", f"{self.max_bytes:,}", p.name)
            self.dropped += dropped
            return dropped


class _Concat:
    """A read-only file over several files in a row (a stream's chunks)."""

    def __init__(self, paths: list[Path]):
        self._paths, self._f = list(paths), None

    def read(self, n: int = -1) -> bytes:
        """Up to n bytes (all with n < 0), across file boundaries: tarfile wants full reads."""
        out = bytearray()
        while n < 0 or len(out) < n:
            if self._f is None:
                if not self._paths:
                    break
                self._f = open(self._paths.pop(0), "rb")
            data = self._f.read(-1 if n < 0 else n - len(out))
            if not data:
                self._f.close()
                self._f = None
            out += data
        return bytes(out)


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except FileNotFoundError:
        return 0


def _remove(p: Path) -> None:
    if p.is_dir():
        shutil.rmtree(p, ignore_errors=True)
    else:
        p.unlink(missing_ok=True)
