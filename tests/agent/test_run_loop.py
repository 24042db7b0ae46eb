"""`run`'s one loop: it samples, collects and closes windows from the calling thread, wakes
once per sample interval (only to collect when there is no sampler), and leaves bundling to
whoever it hands the windows to."""
import json
import tarfile
import threading
import time

from agent.capture import Capture, run_loop
from agent.nvml_sampler import Sampler
from agent.spool import Spool
from agent.tailer import LogTailer
from tests.support.nvml_sampler import FakeReader


class CountingStop(threading.Event):
    """A stop event that counts the loop's sleeps and sets itself after `seconds`."""

    def __init__(self, seconds: float):
        super().__init__()
        self.waits, self.deadline = 0, time.monotonic() + seconds

    def wait(self, timeout=None):
        self.waits += 1
        if time.monotonic() >= self.deadline:
            self.set()
        return super().wait(timeout)


def test_one_thread_samples_collects_and_closes_windows(tmp_path):
    spool = Spool(tmp_path / "spool")
    log = tmp_path / "serve.log"
    log.write_bytes(b"before the start\n")
    sampler = Sampler(FakeReader(), interval=0.02, host="h")
    tailer = LogTailer([str(log)], spool)
    capture = Capture(spool, sampler, tailer)
    windows, threads_seen = [], set()

    def on_window(start, end, chunks):
        windows.append((start, end, chunks))

    def appender():
        for i in range(5):
            time.sleep(0.1)
            with open(log, "ab") as f:
                f.write(b"line %d\n" % i)

    writer = threading.Thread(target=appender)
    writer.start()
    threads_before = threading.active_count()
    stop = CountingStop(1.0)
    original = sampler.sample_once
    sampler.sample_once = lambda: threads_seen.add(threading.get_ident()) or original()
    open_start = run_loop(capture, stop, interval=0.02, collect_every=0.1, ship_every=0.3, on_window=on_window)
    writer.join()

    assert threads_seen == {threading.get_ident()}          # sampled in the caller's thread
    assert threading.active_count() == threads_before - 1   # started none (the writer has ended)
    assert 25 <= sampler.samples <= 55                      # about 1 s at 50 Hz
    assert stop.waits <= sampler.samples + 2                # one wake-up per sample: collecting rides along
    assert len(windows) == 3
    assert all(a < b for a, b in zip([w[0] for w in windows], [w[1] for w in windows]))
    assert open_start == windows[-1][1]
    # the windows' chunks bundle into the samples and the lines appended after the start, in order
    capture.collect(final=True)
    logs, nvml_lines = b"", 0
    for start, end, chunks in windows + [(open_start, time.time(), None)]:
        bundle = capture.bundle({"host": "h"}, start, end, chunks=chunks)
        with tarfile.open(bundle.path, "r:gz") as tar:
            for m in tar.getmembers():
                data = tar.extractfile(m).read()
                logs += data if m.name.startswith("logs/") else b""
                nvml_lines += len(data.splitlines()) if m.name == "nvml_samples.jsonl" else 0
    assert logs == b"".join(b"line %d\n" % i for i in range(5))
    assert nvml_lines == 2 * sampler.samples
    assert json.loads(spool.bundles()[0].labels_path.read_text())["labels"]["host"] == "h"


def test_without_a_sampler_the_loop_wakes_only_to_collect(tmp_path):
    spool = Spool(tmp_path / "spool")
    capture = Capture(spool, None, LogTailer([str(tmp_path / "*.log")], spool))
    stop = CountingStop(0.5)
    run_loop(capture, stop, interval=0.001, collect_every=0.1, ship_every=10.0, on_window=lambda *a: None)
    assert stop.waits <= 8  # ~6 collections in 0.5 s, not 500 sample ticks
