"""The S3-compatible backend (AWS S3, MinIO, Ceph RGW): `TRACEDOC_STORAGE=s3://bucket/prefix`.

pyarrow.fs.S3FileSystem rather than boto3: pyarrow is already the engine's dependency and
its one API gives streamed multipart writes (`open_output_stream`), server-side copies and
random-access reads that the Parquet reader turns into ranged GETs of the row groups and
columns it needs. Credentials and region come from the usual AWS chain (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, profiles, instance roles); the endpoint of a
MinIO/Ceph/emulator from TRACEDOC_S3_ENDPOINT_URL or AWS_ENDPOINT_URL.

An upload streams to a temporary key while it is hashed, then is copied (server side) to
`<prefix>/<sha[:2]>/<sha>` unless that key already exists, and the temporary key is deleted:
the digest key only ever holds whole, verified bytes. A process killed mid-upload leaves a
`<prefix>/tmp/` object: a bucket lifecycle rule expires them (docs/deployment.md).
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import tempfile
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from ingest.storage.base import CHUNK, Blob, ContentStore, blob_key, parquet_name, parquet_prefix
from ingest.engine.stored_file import StoredFile

# S3 CopyObject copies at most 5 GiB in one request (TRACEDOC_MAX_UPLOAD_BYTES is 4 GiB).
MAX_COPY_BYTES = 5 * 1024**3
# Each read of an S3 stream is one ranged GET: large enough that requests are few, small enough
# that memory stays flat.
DOWNLOAD_CHUNK = 16 << 20
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str  # no leading or trailing slash; "" for the bucket's root

    @classmethod
    def parse(cls, url: str) -> "S3Location":
        parts = urlsplit(url)
        segments = [s for s in parts.path.split("/") if s]
        if (parts.scheme != "s3" or not _BUCKET.fullmatch(parts.netloc) or parts.query or parts.fragment
                or any(s in (".", "..") for s in segments)):
            raise ValueError(f"TRACEDOC_STORAGE={url!r}: expected s3://<bucket>/<prefix> with a valid bucket name")
        return cls(parts.netloc, "/".join(segments))

    def key(self, name: str) -> str:
        """`bucket/prefix/name`, the path pyarrow's S3 filesystem takes."""
        return "/".join(p for p in (self.bucket, self.prefix, name) if p)

    def __str__(self) -> str:
        return f"s3://{self.key('')}"


def s3_filesystem(endpoint_url: str = "", region: str = "") -> pafs.S3FileSystem:
    # Parts are sent as they fill: with background writes, parts queue in memory while the
    # network is slower than the upload coming in (the whole file, measured on an emulator).
    options: dict = {"background_writes": False}
    if endpoint_url:
        url = urlsplit(endpoint_url)
        if url.scheme not in ("http", "https") or not url.netloc:
            raise ValueError(f"S3 endpoint {endpoint_url!r}: expected http(s)://host[:port]")
        options.update(endpoint_override=url.netloc, scheme=url.scheme)
    if region:
        options["region"] = region
    return pafs.S3FileSystem(**options)


class S3Store(ContentStore):
    def __init__(self, url: str, scratch: Path | str, filesystem: pafs.FileSystem | None = None,
                 endpoint_url: str = "", region: str = ""):
        self.location = S3Location.parse(url)
        self.filesystem = filesystem or s3_filesystem(endpoint_url, region)
        self.scratch = Path(scratch)  # this worker's disk: downloads and Parquet files being written

    def __repr__(self) -> str:
        return f"S3Store({str(self.location)!r})"

    def _key(self, name: str) -> str:
        return self.location.key(name)

    def _is_file(self, key: str) -> bool:
        return self.filesystem.get_file_info(key).type == pafs.FileType.File

    def _delete_quietly(self, key: str) -> None:
        try:
            self.filesystem.delete_file(key)
        except FileNotFoundError:
            pass

    def path(self, sha256: str) -> Path:
        raise LookupError(f"blob {sha256} is an object in {self.location}, not a local file: use "
                          "stage_blob(), local_blob() or open_blob()")

    def put_chunks(self, chunks: Iterable[bytes]) -> Blob:
        tmp = self._key(f"tmp/upload-{uuid.uuid4().hex}")
        digest, size = hashlib.sha256(), 0
        try:
            # multipart as it goes: memory holds a part (a few MiB), never the file
            with self.filesystem.open_output_stream(tmp) as out:
                for chunk in chunks:
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            sha256 = digest.hexdigest()
            final = self._key(blob_key(sha256))
            created = not self._is_file(final)
            if created:  # else deduplicated: the same bytes are already stored
                if size > MAX_COPY_BYTES:
                    raise ValueError(f"an upload of {size:,} bytes is over the {MAX_COPY_BYTES:,} bytes S3 copies "
                                     "in one request; keep TRACEDOC_MAX_UPLOAD_BYTES below it")
                self.filesystem.copy_file(tmp, final)
        finally:  # also on failure: closing the stream completed the upload of what was written
            self._delete_quietly(tmp)
        return Blob(sha256, size, created)

    def exists(self, sha256: str) -> bool:
        return self._is_file(self._key(blob_key(sha256)))

    def delete_blob(self, sha256: str) -> None:
        self._delete_quietly(self._key(blob_key(sha256)))

    def _missing(self, sha256: str) -> FileNotFoundError:
        return FileNotFoundError(f"blob {sha256} is missing from {self.location}")

    def _download(self, sha256: str, dest: Path) -> None:
        """The object streamed to `dest`, its digest checked on the way."""
        try:
            source = self.filesystem.open_input_stream(self._key(blob_key(sha256)), compression=None)
        except FileNotFoundError:
            raise self._missing(sha256) from None
        digest = hashlib.sha256()
        with source, open(dest, "wb") as out:
            while chunk := source.read(DOWNLOAD_CHUNK):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != sha256:  # the digest is the name: anything else is damage
            Path(dest).unlink()
            raise ValueError(f"blob {sha256} in {self.location} holds bytes of digest {digest.hexdigest()}: "
                             "the stored object was changed or damaged")

    @contextmanager
    def local_blob(self, sha256: str) -> Iterator[Path]:
        self.scratch.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=self.scratch, prefix=f"blob-{blob_key(sha256)[3:19]}-")
        os.close(fd)
        try:
            self._download(sha256, Path(name))
            yield Path(name)
        finally:
            Path(name).unlink(missing_ok=True)

    def stage_blob(self, sha256: str, dest: Path) -> Path:
        self._download(sha256, Path(dest))
        return Path(dest)

    def open_blob(self, sha256: str) -> BinaryIO:
        try:
            native = self.filesystem.open_input_file(self._key(blob_key(sha256)))
        except FileNotFoundError:
            raise self._missing(sha256) from None
        return io.BufferedReader(_NativeReader(native), CHUNK)

    def parquet_dir(self, trace_id: int) -> Path:
        return self.scratch / parquet_prefix(trace_id)

    def _delete_stored_parquet(self, trace_id: int, folder: str = "") -> None:
        prefix = self._key("/".join(p for p in (parquet_prefix(trace_id), folder) if p))
        self.filesystem.delete_dir_contents(prefix, missing_dir_ok=True)

    def put_parquet(self, trace_id: int, local: Path) -> str:
        local, folder = Path(local), self.parquet_dir(trace_id)
        inside = local.relative_to(folder).as_posix() if local.is_relative_to(folder) else local.name
        name = parquet_name(f"{parquet_prefix(trace_id)}/{inside}")
        pafs.copy_files(str(local), self._key(name), source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=self.filesystem)
        local.unlink()  # stored: this worker's disk is only a staging area
        return name

    def parquet_file(self, name: str) -> StoredFile:
        return StoredFile(self.filesystem, self._key(parquet_name(name)))


class _NativeReader(io.RawIOBase):
    """A pyarrow random-access file as a raw Python stream, so that io.BufferedReader gives
    it readline() (each refill one ranged GET of CHUNK bytes)."""

    def __init__(self, native: pa.NativeFile):
        self._native = native

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._native.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._native.seek(offset, whence)

    def tell(self) -> int:
        return self._native.tell()

    def close(self) -> None:
        if not self.closed:
            self._native.close()
        super().close()
