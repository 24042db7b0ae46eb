"""An upload larger than the free disk: 507 with an RFC 9457 problem document, and nothing of it
stored (no trace, no blob, no temporary file), while bytes an earlier trace stored stay.

The full disk is a fault injected at the store's write: the file object the store writes
through raises the kernel's OSError(ENOSPC) once a byte budget is spent (a tmpfs of that size
needs root)."""
from __future__ import annotations

import errno
import io

import pytest
from django.core.files.uploadhandler import TemporaryFileUploadHandler
from django.test import Client

import ingest.storage.local
from ingest.models import Trace

FREE_BYTES = 300_000


class FullDiskFile(io.FileIO):
    """A real file whose disk has FREE_BYTES left, shared by every file of the test."""
    written = 0

    def write(self, data) -> int:
        if FullDiskFile.written + len(data) > FREE_BYTES:
            raise OSError(errno.ENOSPC, "No space left on device")
        FullDiskFile.written += len(data)
        return super().write(data)


@pytest.fixture
def full_disk(monkeypatch):
    FullDiskFile.written = 0
    monkeypatch.setattr(ingest.storage.local.os, "fdopen", lambda fd, mode="rb": FullDiskFile(fd, mode.replace("b", "")))


def blobs(storage) -> list[str]:
    return sorted(p.name for p in storage.rglob("*") if p.is_file())


def named(name: str, data: bytes) -> io.BytesIO:
    f = io.BytesIO(data)
    f.name = name
    return f


def test_an_upload_past_the_free_disk_is_a_507_problem_and_nothing_is_kept(alice_api, storage, no_worker, full_disk):
    earlier = alice_api.post("/api/v1/traces/", {"files": [named("kept.log", b"k" * 50_000)]}, format="multipart")
    assert earlier.status_code == 201
    before = blobs(storage)
    assert len(before) == 1

    # the earlier blob again (deduplicated), a new file that fits, then one past the free space
    files = [named("kept.log", b"k" * 50_000), named("small.log", b"s" * 100_000), named("big.log", b"b" * 1_000_000)]
    answer = alice_api.post("/api/v1/traces/", {"files": files}, format="multipart")
    assert answer.status_code == 507, answer.content
    assert answer["Content-Type"] == "application/problem+json"
    problem = answer.json()
    assert problem["status"] == 507 and problem["type"].endswith(":storage-full")
    assert "not enough storage space" in problem["detail"] and "nothing was kept" in problem["detail"]
    assert Trace.objects.count() == 1
    assert blobs(storage) == before  # small.log removed again, no temporary file, kept.log kept


def test_the_upload_page_says_the_disk_is_full(alice, storage, no_worker, full_disk):
    browser = Client()
    browser.force_login(alice)
    page = browser.post("/traces/new/", {"files": [named("big.log", b"b" * 1_000_000)], "name": "", "labels": ""})
    assert page.status_code == 507
    assert "not enough storage space" in page.content.decode()
    assert not Trace.objects.exists() and blobs(storage) == []


class FullDiskUploadHandler(TemporaryFileUploadHandler):
    """Django's handler that spools a big upload to a temporary file, on a disk with
    FREE_BYTES left: its file's writes fail as the kernel's would."""

    def new_file(self, *args, **kwargs):
        super().new_file(*args, **kwargs)
        self.spool = self.file.file  # kept: it owns (and on close removes) the temporary file
        self.file.file = FullDiskFile(self.spool.fileno(), "w", closefd=False)


def test_a_disk_full_while_the_request_is_read_is_a_507_too(alice_api, storage, no_worker, settings):
    settings.FILE_UPLOAD_HANDLERS = [settings.FILE_UPLOAD_HANDLERS[0], f"{__name__}.FullDiskUploadHandler"]
    FullDiskFile.written = 0
    answer = alice_api.post("/api/v1/traces/", {"files": [named("big.log", b"b" * 4_000_000)]}, format="multipart")
    assert answer.status_code == 507, answer.content
    assert answer.json()["type"].endswith(":storage-full") and "nothing was kept" in answer.json()["detail"]
    assert not Trace.objects.exists() and blobs(storage) == []
