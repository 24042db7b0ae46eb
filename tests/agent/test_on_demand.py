"""On-demand captures through the capture folder: the agent's side (OnDemand) and the
program's (CaptureHook), with real files and, for the profiler, real torch."""
import gzip
import json
import tarfile
import time

import pytest

from agent.hook import CaptureHook
from agent.on_demand import OnDemand
from agent.spool import Spool


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def make(tmp_path, timeout=60.0):
    spool, clock = Spool(tmp_path / "spool"), Clock()
    shipped = []
    on_demand = OnDemand(tmp_path / "capture", spool, {"host": "h", "source": "tracedoc-agent"},
                         deliver=lambda job: shipped.append(job()), timeout=timeout, clock=clock)
    return on_demand, clock, shipped


def test_a_profiler_window_becomes_one_bundle_labelled_with_its_request(tmp_path):
    pytest.importorskip("torch")
    import torch
    on_demand, _, shipped = make(tmp_path)
    on_demand.take([{"id": 7, "kind": "profiler", "steps": 3}])
    hook = CaptureHook(tmp_path / "capture", poll_every=0)
    x = torch.randn(16, 16)
    for _ in range(5):
        x = torch.tanh(x @ x)
        hook.step()
    on_demand.poll()
    [bundle] = shipped
    assert bundle.meta["labels"] == {"host": "h", "source": "tracedoc-agent", "capture": "on-demand",
                                     "capture_kind": "profiler", "capture_request": "7"}
    with tarfile.open(bundle.path, "r:gz") as tar:
        [member] = tar.getmembers()
        trace = json.load(gzip.open(tar.extractfile(member)))
    assert member.name.startswith("capture/profiler_trace_") and member.name.endswith(".json.gz")
    assert trace["traceEvents"]
    assert on_demand.outstanding == {} and on_demand.failed == {}
    assert not any(list((tmp_path / "capture" / d).iterdir()) for d in ("requests", "taken", "results"))


def test_one_process_of_several_takes_a_request(tmp_path):
    on_demand, _, _ = make(tmp_path)
    on_demand.take([{"id": 1, "kind": "no-such-kind"}])
    first, second = (CaptureHook(tmp_path / "capture", poll_every=0) for _ in range(2))
    first.step()
    second.step()
    done = json.loads((tmp_path / "capture" / "results" / "1.done.json").read_text())
    assert "no-such-kind" in done["error"]  # one hook answered; the other found nothing to take
    on_demand.poll()
    assert "no-such-kind" in on_demand.failed["1"]
    on_demand.reported(["1"])
    assert on_demand.failed == {}


def test_a_request_nobody_takes_fails_with_the_reason(tmp_path):
    on_demand, clock, shipped = make(tmp_path, timeout=30)
    on_demand.take([{"id": 4, "kind": "flight_recorder"}])
    clock.now = 31
    on_demand.poll()
    assert shipped == [] and "no process took it" in on_demand.failed["4"]
    assert not (tmp_path / "capture" / "requests" / "4.json").exists()


def test_the_hook_is_inert_without_a_capture_folder(monkeypatch):
    monkeypatch.delenv("TRACEDOC_CAPTURE_DIR", raising=False)
    hook = CaptureHook()
    for _ in range(3):
        hook.step()
    assert hook.root is None


def wait_for(on_demand, seconds=10.0):
    """Poll until the agent has shipped or failed every outstanding order."""
    deadline = time.monotonic() + seconds
    while on_demand.outstanding and time.monotonic() < deadline:
        on_demand.poll()
        time.sleep(0.05)


def test_an_nvml_burst_is_taken_by_the_agent_at_100_hz_and_parses_as_nvml_samples(tmp_path):
    from tests.support.nvml_sampler import FakeReader, parse_events
    spool = Spool(tmp_path / "spool")
    shipped = []
    on_demand = OnDemand(tmp_path / "capture", spool, {"host": "h"}, deliver=lambda job: shipped.append(job()),
                         nvml=FakeReader)
    on_demand.take([{"id": 11, "kind": "nvml_burst", "duration_s": 1.5}])
    assert not (tmp_path / "capture" / "requests" / "11.json").exists()  # no program hook involved
    wait_for(on_demand)
    [bundle] = shipped
    assert bundle.meta["labels"]["capture_kind"] == "nvml_burst"
    with tarfile.open(bundle.path, "r:gz") as tar:
        [member] = tar.getmembers()
        data = tar.extractfile(member).read()
    assert member.name == "capture/nvml_burst_h.jsonl"
    report, ev = parse_events(tmp_path, data)
    assert report.format == "nvml_jsonl" and not report.skipped
    util = ev[(ev.name == "gpu.util") & (ev.device == 0)].sort_values("ts")
    # 1.5 s at 100 Hz on an idle test machine: well over the agent's 10 Hz, under the 100 Hz ceiling
    assert 60 <= len(util) <= 151
    assert 8e6 <= util.ts.diff().median() <= 15e6  # ns: a sample every 10 ms
    assert 1 in set(ev[ev.name == "ThrottleReason"].device)  # the power cap of the fake GPU 1


def test_an_nvml_burst_stays_within_its_byte_bound_in_whole_lines(tmp_path):
    from tests.support.nvml_sampler import FakeReader
    on_demand, _, shipped = make(tmp_path)
    on_demand.nvml = FakeReader
    on_demand.take([{"id": 12, "kind": "nvml_burst", "duration_s": 5, "max_bytes": 3000}])
    wait_for(on_demand)
    [bundle] = shipped
    with tarfile.open(bundle.path, "r:gz") as tar:
        data = tar.extractfile(tar.getmembers()[0]).read()
    assert 0 < len(data) <= 3000 and data.endswith(b"\n")
    assert all(json.loads(line) for line in data.splitlines())


def test_an_nvml_burst_without_nvml_fails_with_the_reason(tmp_path):
    from agent.nvml_sampler import NvmlUnavailable

    def no_nvml():
        raise NvmlUnavailable("NVML could not start (NVML Shared Library Not Found)")
    on_demand, _, shipped = make(tmp_path)
    on_demand.nvml = no_nvml
    on_demand.take([{"id": 13, "kind": "nvml_burst", "duration_s": 1}])
    wait_for(on_demand)
    assert shipped == [] and "no NVML on this host" in on_demand.failed["13"]


def test_a_real_nvml_burst_on_an_h200_is_100_hz_and_parses(tmp_path):
    """The fixture was taken by run_burst with the real NVML (tests/fixtures/closed_loop/SOURCES.md)."""
    import gzip as gz
    from pathlib import Path

    from tests.support.nvml_sampler import parse_events
    data = gz.decompress((Path(__file__).resolve().parents[1] / "fixtures" / "closed_loop" / "nvml_burst_h200"
                          / "nvml_burst.jsonl.gz").read_bytes())
    report, ev = parse_events(tmp_path, data)
    assert report.format == "nvml_jsonl" and not report.skipped
    util = ev[ev.name == "gpu.util"].sort_values("ts")
    assert len(util) == 1000 and 9.9e6 <= util.ts.diff().median() <= 10.1e6
    assert (util.ts.iloc[-1] - util.ts.iloc[0]) / 1e9 < 10.0
    # the slow fields stay at once a second inside the burst
    assert 9 <= sum(b'"gpu_uncorrected_ecc"' in line for line in data.splitlines()) <= 11
