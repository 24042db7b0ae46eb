"""Content-addressed artifact storage: path by digest, one copy per content, atomic writes."""
import hashlib
import io

import pytest

from ingest.storage import ContentStore
from tests.corpus import corpus


@pytest.fixture
def store(tmp_path):
    return ContentStore(tmp_path)


def test_bytes_are_stored_under_their_sha256(store, corpus_dir):
    path = corpus("h200", "cudagraph_abort", "kineto_trace.json.gz")
    data = path.read_bytes()
    blob = store.put_path(path)
    digest = hashlib.sha256(data).hexdigest()
    assert (blob.sha256, blob.size) == (digest, len(data))
    assert store.path(digest) == store.root / digest[:2] / digest
    assert store.path(digest).read_bytes() == data


def test_the_same_content_is_stored_once(store):
    a = store.put_file(io.BytesIO(b"same bytes"))
    b = store.put_file(io.BytesIO(b"same bytes"))
    assert a == b
    blobs = [p for p in store.root.rglob("*") if p.is_file()]
    assert blobs == [store.path(a.sha256)]


def test_a_failed_write_leaves_nothing_behind(store):
    def chunks():
        yield b"half of the file"
        raise OSError("disk full")

    with pytest.raises(OSError):
        store.put_chunks(chunks())
    assert [p for p in store.root.rglob("*") if p.is_file()] == []


def test_digests_are_checked_before_they_become_paths(store):
    with pytest.raises(ValueError):
        store.path("../../etc/passwd")
