"""Artifact bytes and parsed events behind one interface (`ContentStore`, ingest/storage/base.py)
with two backends: a local folder (the embedded default, `TRACEDOC_STORAGE=<dir>`) and
S3-compatible object storage (`TRACEDOC_STORAGE=s3://bucket/prefix`, ingest/storage/s3.py)."""
from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings

from ingest.storage.base import CHUNK, Blob, ContentStore, blob_key, register_opener, sha256_of
from ingest.storage.local import LocalStore
from ingest.storage.s3 import S3Store
from ingest.storage.upload_limit import SizeLimitUploadHandler

__all__ = ["CHUNK", "Blob", "ContentStore", "LocalStore", "S3Store", "SizeLimitUploadHandler", "blob_key",
           "open_store", "sha256_of"]

_s3_stores: dict[tuple, S3Store] = {}


def open_store(root: Path | str | None = None) -> ContentStore:
    """The store at `root` (a folder or an s3:// URL), TRACEDOC_STORAGE's when None."""
    spec = str(root or settings.TRACEDOC_STORAGE)
    if not spec.startswith("s3://"):
        return LocalStore(spec)
    # One S3 client per process, made in the process that uses it: the AWS SDK a forked
    # Celery child inherited from its parent is not safe to use.
    key = (os.getpid(), spec, settings.TRACEDOC_S3_ENDPOINT_URL, settings.TRACEDOC_S3_REGION,
           str(settings.TRACEDOC_SCRATCH))
    if key not in _s3_stores:
        _s3_stores[key] = S3Store(spec, settings.TRACEDOC_SCRATCH, endpoint_url=settings.TRACEDOC_S3_ENDPOINT_URL,
                                  region=settings.TRACEDOC_S3_REGION)
    return _s3_stores[key]


register_opener(open_store)
