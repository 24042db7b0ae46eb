"""The local-folder backend (the embedded default): blobs at `<root>/<sha[:2]>/<sha>`, Parquet
at `<root>/parquet/<trace id>/`. Writes go to a temporary file in `<root>/tmp` and are moved into
place with os.replace: a reader never sees half a file, a crash leaves a stray temporary file."""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

from ingest.storage.base import Blob, ContentStore, blob_key, parquet_name, parquet_prefix
from ingest.engine.stored_file import StoredFile


class LocalStore(ContentStore):
    def __init__(self, root: Path | str):
        self.root = Path(root)
        self.scratch = self.root / "tmp"  # on the store's disk: os.replace into place is atomic

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    def path(self, sha256: str) -> Path:
        return self.root / blob_key(sha256)

    def put_chunks(self, chunks: Iterable[bytes]) -> Blob:
        self.scratch.mkdir(parents=True, exist_ok=True)
        digest, size = hashlib.sha256(), 0
        fd, tmp_name = tempfile.mkstemp(dir=self.scratch, prefix="upload-")
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in chunks:
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            final = self.path(digest.hexdigest())
            created = not final.exists()
            if not created:
                os.unlink(tmp_name)  # deduplicated: the same bytes are already stored
            else:
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp_name, final)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        return Blob(digest.hexdigest(), size, created)

    def exists(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def delete_blob(self, sha256: str) -> None:
        self.path(sha256).unlink(missing_ok=True)

    def _existing(self, sha256: str) -> Path:
        path = self.path(sha256)
        if not path.is_file():
            raise FileNotFoundError(f"blob {sha256} is missing from the store at {self.root}")
        return path

    @contextmanager
    def local_blob(self, sha256: str) -> Iterator[Path]:
        yield self._existing(sha256)

    def stage_blob(self, sha256: str, dest: Path) -> Path:
        os.symlink(self._existing(sha256), dest)
        return Path(dest)

    def open_blob(self, sha256: str) -> BinaryIO:
        return open(self.path(sha256), "rb")

    def parquet_dir(self, trace_id: int) -> Path:
        return self.root / parquet_prefix(trace_id)

    def put_parquet(self, trace_id: int, local: Path) -> str:
        local, folder = Path(local), self.parquet_dir(trace_id)
        if not local.is_relative_to(folder):  # written elsewhere: moved in (same disk: atomic)
            folder.mkdir(parents=True, exist_ok=True)
            local = Path(shutil.move(local, folder / local.name))
        return parquet_name(local.relative_to(self.root).as_posix())

    def parquet_file(self, name: str) -> StoredFile:
        return StoredFile.local(self.root / parquet_name(name))
