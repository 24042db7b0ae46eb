"""The sampler's JSON lines go through the server's own parser (ingest.engine.parse.parse_artifact)."""
import gzip
import itertools
import json
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from agent.nvml_sampler import NvmlReader, NvmlUnavailable, Sampler
from ingest.engine.parse import parse_artifact
from tests.support.nvml_sampler import FakeReader, parse_events

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "agent" / "nvml_agent_h200.jsonl.gz"


def test_sampler_lines_parse_with_the_server_parser(tmp_path):
    clock = itertools.count(1_795_940_314_000_000_000, 100_000_000)
    sampler = Sampler(FakeReader(), interval=0.1, host="gpu-host-3", clock=lambda: next(clock))
    for _ in range(5):
        assert sampler.sample_once() == 2
    report, ev = parse_events(tmp_path, sampler.drain())

    assert report.format == "nvml_jsonl"
    assert not report.skipped
    util = ev[ev.name == "gpu.util"]
    assert sorted(util[util.device == 0].value) == [10, 20, 30, 40, 50]
    assert sorted(util[util.device == 1].value) == [11, 21, 31, 41, 51]
    assert set(ev.host) == {"gpu-host-3"}
    power = ev[(ev.name == "power") & (ev.device == 0)]
    assert sorted(power.value) == [101.0, 102.0, 103.0, 104.0, 105.0]  # mW -> W
    mem = ev[(ev.name == "mem.used") & (ev.device == 1)]
    assert sorted(mem.value) == [float((1 << 30) * n) for n in range(1, 6)]

    # Xid 79 read during the fourth sample (after GPU 1's third read) lands on GPU 1's fourth line
    xid = ev[ev.name == "Xid"]
    assert list(xid.device) == [1] and list(xid.value) == [79.0] and list(xid.severity) == ["critical"]
    assert xid.ts.iloc[0] == sorted(util[util.device == 1].ts)[3]

    throttle = ev[(ev.name == "ThrottleReason") & (ev.device == 1)]
    assert [json.loads(a)["reasons"] for a in throttle["attrs"]] == [[], ["SwPowerCap"]]

    procs = ev[ev.name == "proc.mem.used"]
    assert set(zip(procs.device, procs.pid)) == {(0, 4000), (1, 4001)}
    # PCIe is read at most once a second: only in the first of these back-to-back samples
    assert len(ev[ev.name == "pcie.rx"]) == 2


def test_the_buffer_is_bounded_and_keeps_the_newest_lines(tmp_path):
    sampler = Sampler(FakeReader(), host="h", max_lines=3)
    for _ in range(3):
        sampler.sample_once()
    lines = [json.loads(x) for x in sampler.drain().splitlines()]
    assert sampler.dropped == 3
    assert [(r["gpu"], r["util_gpu"]) for r in lines] == [(1, 21), (0, 30), (1, 31)]
    assert sampler.drain() == b""


def test_the_sampler_thread_samples_until_stopped():
    sampler = Sampler(FakeReader(), interval=0.01, host="h").start()
    time.sleep(0.2)
    sampler.stop()
    count = sampler.samples
    assert count >= 5
    time.sleep(0.05)
    assert sampler.samples == count
    assert len(sampler.drain().splitlines()) == 2 * count


def test_without_nvml_the_reader_says_why_in_one_line():
    try:
        NvmlReader().close()
    except NvmlUnavailable as e:
        assert "NVML" in str(e) and "\n" not in str(e)
    else:
        pytest.skip("NVML works on this host")


@pytest.mark.gpu
def test_real_nvml_samples_parse(tmp_path):
    try:
        reader = NvmlReader()
    except NvmlUnavailable as e:
        pytest.skip(str(e))
    sampler = Sampler(reader, host="gpu-test")
    for _ in range(3):
        sampler.sample_once()
    reader.close()
    _, ev = parse_events(tmp_path, sampler.drain())
    assert (ev[ev.name == "mem.total"].value > 0).all()
    assert set(ev[ev.name == "gpu.util"].device) == set(reader.devices())


def test_h200_capture_fixture_parses_with_gpu_load(tmp_path):
    """~20 s of `tracedoc-agent sample` on an H200 while a bf16 matmul loop ran."""
    records = [json.loads(line) for line in gzip.decompress(FIXTURE.read_bytes()).splitlines()]
    report = parse_artifact(FIXTURE, tmp_path / "events.parquet", "a1")
    ev = pq.read_table(tmp_path / "events.parquet").to_pandas()

    assert report.format == "nvml_jsonl" and not report.skipped
    util, mem = ev[ev.name == "gpu.util"], ev[ev.name == "mem.used"]
    assert len(util) == len(records)
    assert util.value.max() == max(r["util_gpu"] for r in records) > 50  # the matmul loop kept it busy
    assert mem.value.max() == max(r["mem_used"] for r in records) > 1 << 30
    assert (ev[ev.name == "clock.sm"].value > 0).all()
    procs = ev[ev.name == "proc.mem.used"]
    assert len(procs) and (procs.pid > 0).all()  # the matmul process was seen with its memory
