"""The store's interface: content-addressed artifact bytes and each trace's Parquet event files.

`ContentStore()` is the store TRACEDOC_STORAGE configures (a folder, or `s3://bucket/prefix`),
`ContentStore(root)` the store at `root`: callers never name a backend. Both backends keep
blobs under their sha256 (`<sha[:2]>/<sha>`, the digest validated before it becomes a path or
a key: never the upload's name) and Parquet files under `parquet/<trace id>/`.
"""
from __future__ import annotations

import hashlib
import re
import shutil
from abc import ABCMeta, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Callable, Iterable

from ingest.engine.stored_file import StoredFile

CHUNK = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")
_PARQUET_NAME = re.compile(r"parquet/[0-9]+(/[A-Za-z0-9_.-]+)+")


@dataclass(frozen=True)
class Blob:
    sha256: str
    size: int
    created: bool = field(default=False, compare=False)  # this put wrote it (not deduplicated)


def blob_key(sha256: str) -> str:
    """`<sha[:2]>/<sha>` of a validated digest: the only name a blob is stored under."""
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise ValueError(f"not a sha256 digest: {sha256!r}")
    return f"{sha256[:2]}/{sha256}"


def parquet_name(name: str) -> str:
    """A stored Parquet name (`parquet/<trace id>/<file>`, as Artifact.parquet holds it), checked
    before it becomes a path or a key."""
    if not _PARQUET_NAME.fullmatch(name or "") or ".." in PurePosixPath(name).parts:
        raise ValueError(f"not a stored Parquet file name: {name!r}")
    return name


def parquet_prefix(trace_id: int) -> str:
    return f"parquet/{int(trace_id)}"


def sha256_of(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


class _Configured(ABCMeta):
    """`ContentStore(...)` opens the configured backend (ingest.storage registers the opener,
    which knows both backends); a backend class called by name is constructed as usual."""
    opener: Callable[..., "ContentStore"] | None = None

    def __call__(cls, *args, **kwargs):
        if cls is ContentStore:
            assert _Configured.opener is not None, "import ingest.storage, which registers the backends"
            return _Configured.opener(*args, **kwargs)
        return super().__call__(*args, **kwargs)


class ContentStore(metaclass=_Configured):
    """Where artifact bytes and parsed events live. Writes are idempotent (content addressing)
    and atomic: a reader never sees a half-written blob or Parquet file."""

    scratch: Path  # this process's local folder for temporary files (uploads in flight, downloads)

    @abstractmethod
    def put_chunks(self, chunks: Iterable[bytes]) -> Blob:
        """Store the bytes, hashed as they stream (never all in memory); their digest."""

    def put_file(self, f: BinaryIO) -> Blob:
        return self.put_chunks(iter(lambda: f.read(CHUNK), b""))

    def put_path(self, path: Path | str) -> Blob:
        with open(path, "rb") as f:
            return self.put_file(f)

    @abstractmethod
    def exists(self, sha256: str) -> bool: ...

    @abstractmethod
    def delete_blob(self, sha256: str) -> None: ...

    @abstractmethod
    def local_blob(self, sha256: str) -> AbstractContextManager[Path]:
        """A local file with the blob's bytes for the parsers, for the `with` block (the blob
        itself on a local store; a verified download into `scratch`, removed after, on S3)."""

    @abstractmethod
    def stage_blob(self, sha256: str, dest: Path) -> Path:
        """The blob's bytes at `dest`, a path in the caller's temporary folder under the name
        the parsers should see: a symbolic link to the blob on a local store, a verified
        download on S3. Gone with that folder (a killed worker's folder is swept by the next run)."""

    @abstractmethod
    def open_blob(self, sha256: str) -> BinaryIO:
        """The blob's bytes as a readable, seekable binary file (ranged reads on S3)."""

    @abstractmethod
    def parquet_dir(self, trace_id: int) -> Path:
        """The local folder this process writes the trace's Parquet files into; `put_parquet`
        then stores each one."""

    def reset_parquet_dir(self, trace_id: int) -> Path:
        """No Parquet file of the trace left, stored or local (a re-run starts from nothing);
        the emptied local folder."""
        self._delete_stored_parquet(trace_id)
        d = self.parquet_dir(trace_id)
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        return d

    def discard_parquet(self, trace_id: int, folder: str) -> None:
        """The trace's Parquet files under `parquet/<trace id>/<folder>/` gone, stored and local
        (the parts of a fan-out, once merged)."""
        sub = parquet_name(f"{parquet_prefix(trace_id)}/{folder}").split("/", 2)[2]
        self._delete_stored_parquet(trace_id, sub)
        shutil.rmtree(self.parquet_dir(trace_id) / sub, ignore_errors=True)

    def _delete_stored_parquet(self, trace_id: int, folder: str = "") -> None:
        """The trace's stored Parquet files (under `folder`) where they are not the local
        folder (S3)."""

    @abstractmethod
    def put_parquet(self, trace_id: int, local: Path) -> str:
        """Store a Parquet file written under `parquet_dir(trace_id)`; its stored name
        (`parquet/<trace id>/...`, what Artifact.parquet holds)."""

    @abstractmethod
    def parquet_file(self, name: str) -> StoredFile:
        """A stored Parquet file, for readers that fetch only the row groups and columns
        they read."""


def register_opener(opener: Callable[..., ContentStore]) -> None:
    _Configured.opener = opener
