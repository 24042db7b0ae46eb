import gzip
import io
import json
import tarfile
import zipfile

import pytest

from ingest.engine.artifact_results import parse_one
from ingest.engine.bundle import archive_kind, expand
from ingest.engine.events import ParseError
from tests.corpus import corpus

NVML = ("nvidia-smi-q.txt", "nvidia-smi-dmon.txt", "nvidia-smi.txt")


def _tar(path, files: dict, mode="w:gz", extra=()):
    with tarfile.open(path, mode) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info)
    return path


def test_folder_tar_and_zip_give_the_same_members(tmp_path, corpus_dir):
    files = {f"nvml/{n}": corpus("h200", "nvml", n).read_bytes() for n in NVML}
    tgz = _tar(tmp_path / "b.bin", files)  # suffix says nothing: detected by content
    z = tmp_path / "b.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    assert archive_kind(tgz) == "tar.gz" and archive_kind(z) == "zip"
    with expand([tgz, z, corpus("h200", "nvml")], tmp_path / "w") as members:
        names = [m.name for m in members]
        assert sorted(names[:3]) == sorted(files)
        for m in members[:3]:
            assert m.path.read_bytes() == files[m.name]
        assert sorted(names[3:6]) == sorted(f"{n}~2" for n in files)
        assert set(names[6:]) == {p.name for p in corpus("h200", "nvml").iterdir()}
    assert not (tmp_path / "w").exists()


def test_gzip_of_one_file_is_an_artifact(tmp_path, corpus_dir):
    p = tmp_path / "trace.json.gz"
    p.write_bytes(gzip.compress(corpus("h200", "healthy_decode", "otlp_traces.json").read_bytes()))
    with expand([p], tmp_path / "w") as members:
        assert [(m.name, m.path) for m in members] == [("trace.json.gz", p)]


def test_zip_slip_rejected(tmp_path):
    z = tmp_path / "evil.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("ok.txt", "fine")
        zf.writestr("../../escape.txt", "owned")
    with pytest.raises(ParseError) as e:
        with expand([z], tmp_path / "w"):
            pass
    assert "evil.zip" in str(e.value) and "../../escape.txt" in str(e.value) and "escapes" in str(e.value)
    assert not (tmp_path / "escape.txt").exists()
    absolute = _tar(tmp_path / "abs.tar", {"/etc/passwd": b"x"}, mode="w")
    with pytest.raises(ParseError, match="abs.tar: member '/etc/passwd'"):
        with expand([absolute], tmp_path / "w"):
            pass


def test_links_and_devices_skipped_with_warning(tmp_path):
    link = tarfile.TarInfo("logs/passwd")
    link.type, link.linkname = tarfile.SYMTYPE, "../../../etc/passwd"
    hard = tarfile.TarInfo("logs/hard")
    hard.type, hard.linkname = tarfile.LNKTYPE, "/etc/shadow"
    dev = tarfile.TarInfo("logs/null")
    dev.type = tarfile.CHRTYPE
    t = _tar(tmp_path / "links.tgz", {"logs/rank0.log": b"hello\n"}, extra=(link, hard, dev))
    with expand([t], tmp_path / "w") as members:
        assert [m.name for m in members] == ["logs/rank0.log"]
        assert len(members.warnings) == 3 and "link" in members.warnings[0]
        assert all(not m.path.is_symlink() for m in members)


def test_decompression_bomb_stops_at_the_limit(tmp_path):
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("zeros.log", b"\0" * (4 << 20))
    assert bomb.stat().st_size < 64 << 10
    with pytest.raises(ParseError) as e:
        with expand([bomb], tmp_path / "w", max_bytes=1 << 20):
            pass
    assert "bomb.zip" in str(e.value) and "zeros.log" in str(e.value) and "decompression bomb" in str(e.value)
    tbomb = _tar(tmp_path / "bomb.tgz", {"zeros.log": b"\0" * (4 << 20)})
    with pytest.raises(ParseError, match="bomb.tgz: member 'zeros.log'"):
        with expand([tbomb], tmp_path / "w", max_bytes=1 << 20):
            pass


def test_member_count_bounded(tmp_path):
    t = _tar(tmp_path / "many.tar", {f"f{i}.log": b"x\n" for i in range(20)}, mode="w")
    with pytest.raises(ParseError, match="at most 10 files"):
        with expand([t], tmp_path / "w", max_members=10):
            pass


def test_nested_archive_skipped(tmp_path):
    inner = _tar(tmp_path / "inner.tgz", {"a.log": b"a\n"})
    outer = tmp_path / "outer.zip"
    with zipfile.ZipFile(outer, "w") as zf:
        zf.write(inner, "inner.tgz")
        zf.writestr("b.log", "b\n")
    with expand([outer], tmp_path / "w") as members:
        assert [m.name for m in members] == ["b.log"]
        assert "nested archives are not expanded" in members.warnings[0]


def test_truncated_archive_named(tmp_path):
    t = _tar(tmp_path / "t.tgz", {f"f{i}.log": bytes(range(256)) * 400 for i in range(4)})
    cut = tmp_path / "cut.tgz"
    cut.write_bytes(t.read_bytes()[: t.stat().st_size // 2])
    with pytest.raises(ParseError, match="cut.tgz: after member 'f"):
        with expand([cut], tmp_path / "w"):
            pass


def test_one_bad_member_does_not_lose_the_others(tmp_path, corpus_dir):
    good = corpus("h200", "nvml", "nvidia-smi-q.txt").read_bytes()
    t = _tar(tmp_path / "b.tgz", {"q.txt": good, "broken.pb": b"\x0a\xff\xff\x03service.name",
                                  "empty.log": b""})
    with expand([t], tmp_path / "w") as members:
        results = {m.name: parse_one(m.name, m.path, tmp_path) for m in members}
    assert results["q.txt"].events > 0 and not results["q.txt"].error
    assert results["broken.pb"].error.startswith("broken.pb: byte 0:")
    assert results["empty.log"].error


def test_clock_file_is_read_not_parsed(tmp_path):
    t = _tar(tmp_path / "c.tgz", {"perf.txt": b"x\n",
                                  "tracedoc-clock.json": json.dumps({"offsets_ns": {"perf.txt": 5}}).encode()})
    with expand([t], tmp_path / "w") as members:
        assert [m.name for m in members] == ["perf.txt"] and members.clock_offsets == {"perf.txt": 5}
    bad = _tar(tmp_path / "bad.tgz", {"tracedoc-clock.json": b'{"offsets_ns": {"a": "soon"}}'})
    with pytest.raises(ParseError, match=r"tracedoc-clock.json: offsets_ns\['a'\]"):
        with expand([bad], tmp_path / "w"):
            pass
