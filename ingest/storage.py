"""Artifact bytes, stored content-addressed: `<root>/<sha256[:2]>/<sha256>`.

The same file uploaded twice is stored once. Writes go to a temporary file in the store
and are moved into place with os.replace, so a reader never sees a half-written blob and
a crash leaves at most a stray temporary file. Parsed events live beside the blobs in
`<root>/parquet/<trace id>/`.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterable

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload

CHUNK = 1 << 20


@dataclass(frozen=True)
class Blob:
    sha256: str
    size: int


class ContentStore:
    def __init__(self, root: Path | str | None = None):
        self.root = Path(root or settings.TRACEDOC_STORAGE)

    def path(self, sha256: str) -> Path:
        if len(sha256) != 64 or not all(c in "0123456789abcdef" for c in sha256):
            raise ValueError(f"not a sha256 digest: {sha256!r}")
        return self.root / sha256[:2] / sha256

    def put_chunks(self, chunks: Iterable[bytes]) -> Blob:
        """Store the bytes; returns their digest. Idempotent and safe against crashes."""
        tmp_dir = self.root / "tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        digest, size = hashlib.sha256(), 0
        fd, tmp_name = tempfile.mkstemp(dir=tmp_dir, prefix="upload-")
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in chunks:
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            final = self.path(digest.hexdigest())
            if final.exists():
                os.unlink(tmp_name)  # deduplicated: the same bytes are already stored
            else:
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp_name, final)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        return Blob(digest.hexdigest(), size)

    def put_file(self, f: BinaryIO) -> Blob:
        return self.put_chunks(iter(lambda: f.read(CHUNK), b""))

    def put_path(self, path: Path | str) -> Blob:
        with open(path, "rb") as f:
            return self.put_file(f)

    def parquet_dir(self, trace_id: int) -> Path:
        return self.root / "parquet" / str(int(trace_id))

    def reset_parquet_dir(self, trace_id: int) -> Path:
        """An empty Parquet folder for the trace: a re-run starts from nothing."""
        d = self.parquet_dir(trace_id)
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        return d


def sha256_of(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


class SizeLimitUploadHandler(FileUploadHandler):
    """Stops an upload as soon as it exceeds TRACEDOC_MAX_UPLOAD_BYTES (all files together).

    FILE_UPLOAD_MAX_MEMORY_SIZE is only a spill-to-disk threshold, not a cap. The view
    answers 413 when it sees `request.upload_too_large`.
    """

    def __init__(self, request=None):
        super().__init__(request)
        self.limit = settings.TRACEDOC_MAX_UPLOAD_BYTES
        self.received = 0

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        self.received = 0
        if content_length and content_length > self.limit:
            self._refuse()

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > self.limit or getattr(self.request, "upload_too_large", False):
            self._refuse()
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size):
        return None

    def _refuse(self) -> None:
        if self.request is not None:
            self.request.upload_too_large = True
