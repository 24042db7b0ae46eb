"""The S3 backend of the content store against an S3 API emulator (moto's server mode, started
here on a free port; tests/support/s3_emulator.py): blobs round trip, deduplicate and are checked;
Parquet files are stored and read back by ranges, and the diagnosis reads the same events from
S3 as from a local folder."""
from __future__ import annotations

import hashlib
import io
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from diagnosis.engine.pipeline import load_events
from ingest.engine.artifact_results import ArtifactResult, parse_one
from ingest.storage import ContentStore, LocalStore, S3Store
from ingest.engine.stored_file import StoredFile
from tests.corpus import corpus
from tests.support.s3_emulator import CREDENTIALS, s3_emulator

KINETO = ("h200", "cudagraph_abort", "kineto_trace.json.gz")


@pytest.fixture(scope="module")
def emulator():
    with pytest.MonkeyPatch.context() as env:
        for name, value in CREDENTIALS.items():  # the AWS credential chain of the code under test
            env.setenv(name, value)
        with s3_emulator() as running:
            yield running


@pytest.fixture
def store(emulator, tmp_path):
    bucket = emulator.new_bucket()
    store = S3Store(f"s3://{bucket}/traces/prod", tmp_path / "scratch", endpoint_url=emulator.endpoint_url)
    store.bucket = bucket  # for the assertions below
    return store


def test_an_s3_url_opens_the_s3_backend(emulator, settings, tmp_path):
    settings.TRACEDOC_S3_ENDPOINT_URL = emulator.endpoint_url
    settings.TRACEDOC_SCRATCH = tmp_path
    settings.TRACEDOC_STORAGE = "s3://some-bucket/a/b"
    assert isinstance(ContentStore(), S3Store) and str(ContentStore().location) == "s3://some-bucket/a/b"
    assert ContentStore() is ContentStore()  # one S3 client per process
    assert isinstance(ContentStore(tmp_path), LocalStore)
    for bad in ("s3://", "s3://UPPER/x", "s3://bucket/../x", "s3://b/x?versionId=1"):
        with pytest.raises(ValueError, match="s3://<bucket>"):
            ContentStore(bad)


def test_a_blob_round_trips_under_its_digest(store, emulator, tmp_path, corpus_dir):
    path = corpus(*KINETO)
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    blob = store.put_path(path)
    assert (blob.sha256, blob.size, blob.created) == (digest, len(data), True)
    assert emulator.files(store.bucket) == {f"{store.bucket}/traces/prod/{digest[:2]}/{digest}": len(data)}
    assert store.exists(digest)
    with store.open_blob(digest) as f:
        assert f.read(100) == data[:100]
        f.seek(len(data) - 10)
        assert f.read() == data[-10:]
    with store.local_blob(digest) as local:
        assert local.read_bytes() == data and local.parent == store.scratch
    assert not local.exists()  # the download lived for the block only
    staged = store.stage_blob(digest, tmp_path / path.name)
    assert staged.read_bytes() == data and staged.name == path.name  # under the name the parsers see


def test_the_same_bytes_are_stored_once(store, emulator):
    first = store.put_file(io.BytesIO(b"same bytes"))
    again = store.put_chunks(iter([b"same ", b"bytes"]))
    assert again == first and (first.created, again.created) == (True, False)
    assert list(emulator.files(store.bucket)) == [f"{store.bucket}/traces/prod/{first.sha256[:2]}/{first.sha256}"]


def test_an_upload_streams_with_memory_bounded_by_a_part(store):
    """96 MiB in: the S3 client holds one multipart part (Arrow's memory pool, sampled as each
    chunk is handed over), never the file."""
    block, peak = os.urandom(1 << 20), [0]

    def chunks():
        for _ in range(96):
            peak[0] = max(peak[0], pa.total_allocated_bytes())
            yield block

    blob = store.put_chunks(chunks())
    assert blob.size == 96 << 20 and store.exists(blob.sha256)
    assert peak[0] < 24 << 20, f"{peak[0]:,} bytes held while uploading"


def test_a_failed_upload_leaves_no_object(store, emulator):
    def chunks():
        yield b"half of the file" * 1000
        raise OSError("connection reset by the client")

    with pytest.raises(OSError, match="connection reset"):
        store.put_chunks(chunks())
    assert emulator.files(store.bucket) == {}


def test_a_changed_object_is_refused_and_a_missing_one_named(store, emulator, tmp_path):
    blob = store.put_file(io.BytesIO(b"the real bytes"))
    with emulator.filesystem().open_output_stream(f"{store.bucket}/traces/prod/{blob.sha256[:2]}/{blob.sha256}") as out:
        out.write(b"other bytes")
    with pytest.raises(ValueError, match="changed or damaged"):
        with store.local_blob(blob.sha256):
            pass
    assert list(store.scratch.iterdir()) == []
    with pytest.raises(ValueError, match="changed or damaged"):
        store.stage_blob(blob.sha256, tmp_path / "staged.log")
    assert not (tmp_path / "staged.log").exists()
    missing = hashlib.sha256(b"never stored").hexdigest()
    with pytest.raises(FileNotFoundError, match=missing):
        with store.local_blob(missing):
            pass
    with pytest.raises(FileNotFoundError, match=missing):
        store.open_blob(missing)


def test_keys_come_from_validated_digests_and_names_only(store):
    for bad in ("../../etc/passwd", "A" * 64, "ab/" + "0" * 61):
        with pytest.raises(ValueError, match="not a sha256"):
            store.open_blob(bad)
    for bad in ("parquet/1/../../x.parquet", "../parquet/1/x.parquet", "parquet/x/y.parquet", "parquet/1"):
        with pytest.raises(ValueError, match="not a stored Parquet"):
            store.parquet_file(bad)


class CountingReads(io.RawIOBase):
    """The stored file as the Parquet reader sees it, counting the bytes fetched: each read of
    the S3 file is one ranged GET of that many bytes."""

    def __init__(self, native: pa.NativeFile):
        self.native, self.fetched = native, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self.native.seek(offset, whence)

    def tell(self) -> int:
        return self.native.tell()

    def read(self, n: int = -1) -> bytes:
        data = self.native.read() if n is None or n < 0 else self.native.read(n)
        self.fetched += len(data)
        return data


def test_parquet_is_stored_and_read_back_by_ranges(store, emulator):
    rows = 200_000
    table = pa.table({f"c{i}": pa.array(list(range(i * rows, (i + 1) * rows)), pa.int64()) for i in range(8)})
    local = store.reset_parquet_dir(7) / "events.parquet"
    pq.write_table(table, local, row_group_size=rows // 4, compression="none")
    name = store.put_parquet(7, local)
    assert name == "parquet/7/events.parquet" and not local.exists()  # the worker's copy goes once stored
    stored = store.parquet_file(name)
    assert stored.exists() and stored.remote and str(stored) == f"s3://{store.bucket}/traces/prod/{name}"
    size = emulator.files(store.bucket)[stored.path]
    with stored.open() as native:
        reads = CountingReads(native)
        one = pq.ParquetFile(reads).read_row_group(2, columns=["c5"])
    assert one.column("c5").to_pylist() == list(range(5 * rows + rows // 2, 5 * rows + 3 * rows // 4))
    assert reads.fetched < size / 20, (reads.fetched, size)  # a column of a row group and the footer only
    with stored.open() as native:
        assert pq.ParquetFile(native).read().equals(table)
    store.reset_parquet_dir(7)  # a re-parse starts from nothing
    assert not stored.exists() and emulator.files(store.bucket) == {}


def test_the_diagnosis_reads_the_same_events_from_s3(store, tmp_path, corpus_dir):
    path = corpus(*KINETO)
    local = parse_one(path.name, path, tmp_path)
    staged = parse_one(path.name, path, store.reset_parquet_dir(1))
    stored = store.parquet_file(store.put_parquet(1, staged.parquet))
    from_disk, _ = load_events([local])
    from_s3, _ = load_events([ArtifactResult(name=path.name, format=staged.format, events=staged.events,
                                             parquet=stored, meta=staged.meta)])
    assert not local.error and local.events > 0
    assert isinstance(stored, StoredFile) and from_s3.equals(from_disk) and len(from_s3) == local.events
