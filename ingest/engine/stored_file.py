"""A file in a pyarrow filesystem (a local folder or an S3 bucket): what a parsed artifact's
Parquet file is to the diagnosis.

The engine reads it without knowing where it lives: `open()` gives a random-access file, so
the Parquet reader fetches the footer, then only the column chunks of the row groups it
reads (ranged GETs on S3; nothing more is downloaded).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs


@dataclass(frozen=True)
class StoredFile:
    filesystem: pafs.FileSystem
    path: str  # in the filesystem's terms: a local path, or "bucket/key" for S3

    @classmethod
    def local(cls, path: Path | str) -> "StoredFile":
        return cls(pafs.LocalFileSystem(), str(path))

    @property
    def remote(self) -> bool:
        return not isinstance(self.filesystem, pafs.LocalFileSystem)

    def exists(self) -> bool:
        return self.filesystem.get_file_info(self.path).type == pafs.FileType.File

    def open(self) -> pa.NativeFile:
        """Random access: a reader that seeks reads only the bytes it asks for."""
        return self.filesystem.open_input_file(self.path)

    def __str__(self) -> str:
        return f"s3://{self.path}" if isinstance(self.filesystem, pafs.S3FileSystem) else self.path


def stored_file(source: Path | str | StoredFile) -> StoredFile:
    """A Parquet source as the engine is handed it (a path from the CLI and tests, a
    StoredFile from the service's store) as a StoredFile."""
    return source if isinstance(source, StoredFile) else StoredFile.local(source)
