import io
import json
import logging
import tarfile

import pytest

from agent.spool import Spool, safe_stream


def members(bundle_path) -> dict[str, bytes]:
    with tarfile.open(bundle_path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def test_bundle_joins_each_streams_chunks_in_capture_order(tmp_path):
    spool = Spool(tmp_path / "spool")
    dump = tmp_path / "nccl_trace_rank_0"
    dump.write_bytes(b"\x80\x02binary dump")
    spool.add_chunk("nvml_samples.jsonl", b'{"a": 1}\n')
    spool.add_chunk("logs/var/log/train.log", b"first\n")
    spool.add_chunk("nvml_samples.jsonl", b'{"a": 2}\n')
    spool.add_file("dumps/nccl_trace_rank_0", dump)
    spool.add_chunk("logs/var/log/train.log", b"second\n")

    bundle = spool.make_bundle({"host": "h1", "env": "test"}, name="h1 window")

    assert members(bundle.path) == {
        "nvml_samples.jsonl": b'{"a": 1}\n{"a": 2}\n',
        "logs/var/log/train.log": b"first\nsecond\n",
        "dumps/nccl_trace_rank_0": b"\x80\x02binary dump",
    }
    assert bundle.meta["labels"] == {"host": "h1", "env": "test"}
    assert bundle.meta["name"] == "h1 window"
    assert spool.pending_chunks() == []
    assert spool.bundles() == [bundle]


def test_nothing_pending_makes_no_bundle(tmp_path):
    spool = Spool(tmp_path)
    assert spool.add_chunk("nvml_samples.jsonl", b"") is None
    assert spool.make_bundle({}) is None
    assert spool.bundles() == []


class BreaksMidway(io.RawIOBase):
    """A source that fails after its first block, like a disk error while copying a dump."""

    def __init__(self):
        self.reads = 0

    def readable(self):
        return True

    def readinto(self, b):
        self.reads += 1
        if self.reads > 1:
            raise OSError("read error")
        b[:4] = b"half"
        return 4


def test_a_failed_write_leaves_no_partial_chunk(tmp_path):
    spool = Spool(tmp_path)
    with pytest.raises(OSError, match="read error"):
        spool.add_file("dumps/x.pickle", io.BufferedReader(BreaksMidway()))
    assert spool.pending_chunks() == []
    assert list(spool.tmp.iterdir()) == []


def test_files_left_in_tmp_by_a_crash_are_removed_at_start(tmp_path):
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp" / "00000001-000000--nvml_samples.jsonl").write_bytes(b'{"half":')
    spool = Spool(tmp_path)
    assert list(spool.tmp.iterdir()) == []
    assert spool.pending_chunks() == []


def test_bound_drops_the_oldest_chunks_first_with_a_warning(tmp_path, caplog):
    spool = Spool(tmp_path, max_bytes=1000)
    with caplog.at_level(logging.WARNING, logger="agent.spool"):
        for i in range(5):
            spool.add_chunk("logs/a.log", bytes([65 + i]) * 300)
    kept = [p.read_bytes()[:1] for p in spool.pending_chunks()]
    assert kept == [b"C", b"D", b"E"]
    assert spool.size() <= 1000
    assert spool.dropped == 2
    assert sum("dropped the oldest" in r.getMessage() for r in caplog.records) == 2


def test_bound_drops_a_whole_bundle_with_its_labels(tmp_path):
    spool = Spool(tmp_path, max_bytes=10**9)
    old = spool.make_bundle({"w": "1"}) if spool.add_chunk("s", b"x" * 5000) else None
    new = spool.make_bundle({"w": "2"}) if spool.add_chunk("s", b"y" * 10) else None
    spool.max_bytes = new.size + new.labels_path.stat().st_size + 10
    spool.enforce_bound()
    assert spool.bundles() == [new]
    assert not old.labels_path.exists()
    assert json.loads(new.labels_path.read_text())["labels"] == {"w": "2"}


@pytest.mark.parametrize("raw, safe", [
    ("logs//var/log/x.log", "logs/var/log/x.log"),
    ("dumps/../../etc/passwd", "dumps/etc/passwd"),
    ("logs/my file (1).txt", "logs/my_file_1_.txt"),
])
def test_stream_names_are_safe_archive_paths(raw, safe):
    assert safe_stream(raw) == safe
