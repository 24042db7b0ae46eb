import os
import tarfile

from agent.dumps import DumpWatcher
from agent.spool import Spool
from agent.tailer import LogTailer, stream_name


def spooled(spool: Spool, stream: str) -> bytes:
    """Everything spooled for a stream so far, as the bundle will hold it."""
    bundle = spool.make_bundle({})
    if bundle is None:
        return b""
    with tarfile.open(bundle.path, "r:gz") as tar:
        data = tar.extractfile(stream).read() if stream in bundle.meta["streams"] else b""
    spool.remove(bundle)
    return data


def test_follows_appends_rotation_and_truncation_each_line_once(tmp_path):
    spool = Spool(tmp_path / "spool")
    log = tmp_path / "logs" / "train.log"
    log.parent.mkdir()
    log.write_bytes(b"old line before the agent started\n")
    tailer = LogTailer([str(tmp_path / "logs" / "*.log")], spool)
    stream = stream_name(log)
    assert stream == "logs" + str(log)  # the absolute path: files of the same name in two folders stay apart

    tailer.poll()  # starts at the end of a file that was already there
    assert spooled(spool, stream) == b""

    with open(log, "ab") as f:
        f.write(b"step 1\nstep 2\nhalf a li")
    tailer.poll()
    assert spooled(spool, stream) == b"step 1\nstep 2\n"  # the unfinished line waits

    with open(log, "ab") as f:
        f.write(b"ne\nlast line before rotation\n")
    os.rename(log, str(log) + ".1")  # logrotate: move away, start a new file
    log.write_bytes(b"first line after rotation\n")
    tailer.poll()
    assert spooled(spool, stream) == (b"half a line\nlast line before rotation\n"
                                      b"first line after rotation\n")

    log.write_bytes(b"after truncation\n")  # truncated in place (copytruncate), then written
    tailer.poll()
    assert spooled(spool, stream) == b"after truncation\n"

    with open(log, "ab") as f:
        f.write(b"no newline at exit")
    tailer.poll()
    tailer.flush()
    assert spooled(spool, stream) == b"no newline at exit"
    tailer.close()


def test_a_file_appearing_later_is_read_from_its_start(tmp_path):
    spool = Spool(tmp_path / "spool")
    tailer = LogTailer([str(tmp_path / "*.log")], spool)
    tailer.poll()
    late = tmp_path / "rank3.log"
    late.write_bytes(b"NCCL INFO init\nNCCL WARN timeout\n")
    tailer.poll()
    assert spooled(spool, stream_name(late)) == b"NCCL INFO init\nNCCL WARN timeout\n"
    tailer.close()


def test_reads_are_bounded_per_poll(tmp_path):
    spool = Spool(tmp_path / "spool")
    log = tmp_path / "big.log"
    log.write_bytes(b"")
    tailer = LogTailer([str(log)], spool, max_read=1000)
    tailer.poll()
    lines = b"".join(b"line %04d\n" % i for i in range(300))  # 3000 bytes
    log.write_bytes(lines)
    sizes = []
    for _ in range(4):
        sizes.append(tailer.poll())
    assert max(sizes) <= 1000
    assert spooled(spool, stream_name(log)) == lines
    tailer.close()


def test_dumps_are_spooled_once_complete(tmp_path):
    spool = Spool(tmp_path / "spool")
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    (dumps / "nccl_trace_rank_0").write_bytes(b"an old dump")
    watcher = DumpWatcher([dumps], spool)
    assert watcher.poll() == []  # there before the agent: not shipped

    new = dumps / "nccl_trace_rank_1"
    new.write_bytes(b"part")
    (dumps / "unrelated.txt").write_bytes(b"not a dump")
    assert watcher.poll() == []      # just appeared: may still be written
    with open(new, "ab") as f:
        f.write(b" more")
    assert watcher.poll() == []      # grew since: still being written
    assert watcher.poll() == [new]   # unchanged over a poll: complete
    assert watcher.poll() == []      # and only once
    assert spooled(spool, "dumps/nccl_trace_rank_1") == b"part more"

    snap = dumps / "snapshot.pickle"
    snap.write_bytes(b"\x80\x04snapshot")
    new.write_bytes(b"a second timeout")
    assert sorted(watcher.poll(final=True)) == sorted([new, snap])  # the writer exited: take all now
    bundle = spool.make_bundle({})
    assert sorted(bundle.meta["streams"]) == ["dumps/2/nccl_trace_rank_1", "dumps/snapshot.pickle"]
