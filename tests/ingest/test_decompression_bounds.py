"""No file can blow up a worker's memory: decompression bombs, archives that declare (or
write) far more than they hold, and memory snapshots whose pickle repeats one list by
reference are refused early, with the limit named, in bounded memory and time.

The bomb tests parse in a child process and read its peak resident memory (VmHWM)."""
from __future__ import annotations

import gzip
import io
import random
import tarfile
import zipfile

import pytest

from ingest.engine.bundle import expand
from ingest.engine.events import ParseError
from ingest.engine.io import read_all
from tests.ingest.hostile import GIB, MIB, gzip_of_repeats, parse_isolated, shared_reference_snapshot

PEAK_MIB = 500
SECONDS = 60


def test_otlp_json_gzip_of_3_gib_of_blank_space_stops_under_500_mib(tmp_path):
    bomb = gzip_of_repeats(tmp_path / "spans.json.gz", b'{"resourceSpans":[', b" ", 3 * GIB, b"]}")
    assert bomb.stat().st_size < 4 * MIB
    cost = parse_isolated("spans.json.gz", bomb)
    assert "possible decompression bomb" in cost["error"] and "100:1" in cost["error"], cost
    assert "compressed byte" in cost["error"] and cost["events"] == 0
    assert cost["peak_mib"] < PEAK_MIB and cost["seconds"] < SECONDS, cost


def test_kineto_gzip_of_9_gib_of_blank_space_stops_under_500_mib(tmp_path):
    bomb = gzip_of_repeats(tmp_path / "trace.json.gz", b'{"schemaVersion":1,"traceEvents":[', b" ",
                           9 * GIB, b"]}")
    assert bomb.stat().st_size < 12 * MIB
    cost = parse_isolated("trace.json.gz", bomb)
    assert "possible decompression bomb" in cost["error"] and cost["events"] == 0, cost
    assert cost["peak_mib"] < PEAK_MIB and cost["seconds"] < SECONDS, cost


def test_snapshot_of_shared_references_is_refused_before_its_4_million_records(tmp_path):
    snapshot = shared_reference_snapshot(tmp_path / "snapshot.pickle", devices=2000, actions=2000)
    assert snapshot.stat().st_size < 16 * 1024
    cost = parse_isolated("snapshot.pickle", snapshot)
    # refused by the bound that comes first: the objects the unpickler built (ingest.engine.safe_pickle,
    # shared references counted once per reference), before the records are counted
    assert "objects for a pickle of" in cost["error"] and "shared references" in cost["error"], cost
    assert cost["events"] == 0 and cost["peak_mib"] < PEAK_MIB and cost["seconds"] < SECONDS, cost


def test_a_small_snapshot_of_shared_references_still_parses(tmp_path):
    """The bound is on expansion per byte with a floor: 40,000 repeated actions are fine."""
    snapshot = shared_reference_snapshot(tmp_path / "snapshot.pickle", devices=20, actions=2000)
    cost = parse_isolated("snapshot.pickle", snapshot)
    assert cost["error"] == "" and cost["events"] >= 40_000, cost


def _text(nbytes: int, alphabet: int) -> bytes:
    """Log-like text whose gzip ratio grows as the alphabet shrinks."""
    rng = random.Random(7)
    words = [("w%d " % rng.randrange(alphabet)).encode() for _ in range(nbytes // 4)]
    return b"".join(words)[:nbytes]


def test_the_ratio_is_checked_past_the_floor_only(monkeypatch, tmp_path):
    monkeypatch.setenv("TRACEDOC_DECOMPRESSION_FLOOR_BYTES", str(1 * MIB))
    monkeypatch.setenv("TRACEDOC_MAX_DECOMPRESSION_RATIO", str(20))
    ordinary = tmp_path / "ordinary.log.gz"
    ordinary.write_bytes(gzip.compress(_text(4 * MIB, 100_000)))  # about 3:1
    assert len(read_all(ordinary)) == 4 * MIB
    small_bomb = tmp_path / "small.log.gz"
    small_bomb.write_bytes(gzip.compress(b" " * (MIB // 2)))  # 1000:1 but under the floor
    assert len(read_all(small_bomb)) == MIB // 2
    bomb = tmp_path / "bomb.log.gz"
    bomb.write_bytes(gzip.compress(b" " * (8 * MIB)))
    with pytest.raises(ParseError, match=r"at most 20:1 decompression past the first 1,048,576 bytes"):
        read_all(bomb)


def test_the_absolute_cap_holds_whatever_the_ratio(monkeypatch, tmp_path):
    monkeypatch.setenv("TRACEDOC_MAX_DECOMPRESSED_BYTES", str(2 * MIB))
    data = tmp_path / "random.bin.gz"
    data.write_bytes(gzip.compress(random.Random(1).randbytes(3 * MIB)))  # 1:1, over the cap
    with pytest.raises(ParseError, match=r"decompressed byte 2,097,152: expected at most 2,097,152 .*; got more from [\d,]+ compressed bytes"):
        read_all(data)


def _zip_of_zeros(path, members: int, size: int):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(members):
            zf.writestr(f"zeros{i}.log", b"\0" * size)
    return path


def _files_under(folder) -> list:
    return [p for p in folder.rglob("*") if p.is_file()]


def test_a_zip_declaring_256_mib_in_a_few_hundred_kib_is_refused_before_writing(tmp_path):
    bomb = _zip_of_zeros(tmp_path / "bomb.zip", members=4, size=64 * MIB)
    assert bomb.stat().st_size < 1 * MIB
    work = tmp_path / "work"
    work.mkdir()  # kept by expand() (it did not create it): what was written stays visible
    with pytest.raises(ParseError) as e:
        with expand([bomb], work):
            pass
    assert "zip directory (4 members declared" in str(e.value) and "100:1" in str(e.value)
    assert _files_under(work) == []


def test_a_tar_gz_member_is_refused_on_its_declared_size(monkeypatch, tmp_path):
    monkeypatch.setenv("TRACEDOC_DECOMPRESSION_FLOOR_BYTES", str(1 * MIB))
    bomb = tmp_path / "bomb.tgz"
    with tarfile.open(bomb, "w:gz") as tar:
        for name, size in (("small.log", 1000), ("zeros.log", 32 * MIB)):
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(b"\0" * size))
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(ParseError, match=r"bomb.tgz: member 'zeros.log' \(declared size\)"):
        with expand([bomb], work):
            pass
    assert [p.name for p in _files_under(work)] == ["small.log"]


def test_archives_of_one_trace_share_the_trace_wide_total(monkeypatch, tmp_path):
    """Each archive is within its own ratio; together they pass the trace's bound, and the
    second one is refused before it writes."""
    monkeypatch.setenv("TRACEDOC_DECOMPRESSION_FLOOR_BYTES", str(8 * MIB))
    first = _zip_of_zeros(tmp_path / "first.zip", members=3, size=1 * MIB)
    second = _zip_of_zeros(tmp_path / "second.zip", members=3, size=1 * MIB)
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(ParseError, match="second.zip: zip directory .* at most 5,242,880 decompressed bytes in one trace"):
        with expand([first, second], work, max_bytes=5 * MIB):
            pass
    assert sorted(p.name for p in _files_under(work)) == ["zeros0.log", "zeros1.log", "zeros2.log"]
