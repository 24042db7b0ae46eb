"""`ebpf` capture orders, taken by the agent itself (agent.ebpf_order through OnDemand): one
host_stalls window bounded in time and bytes, shipped as a capture with the clock file that
puts bpftrace's monotonic times on the wall clock and read by the server's bpftrace parser;
where bpftrace is missing or the agent may not trace, the order fails at once with the reason.
Most tests run a stand-in bpftrace (a script); the last runs the real one where this host has
it and may trace, and is skipped otherwise."""
import functools
import json
import tarfile
import time

import pytest

from agent import ebpf
from agent.ebpf_order import MAX_DURATION_S, EbpfOrderSettings
from agent.on_demand import OnDemand
from agent.spool import Spool
from tests.agent.test_ebpf import _executable, _parse

LINES = 40


def on_demand_with(tmp_path, settings: EbpfOrderSettings):
    shipped = []
    on_demand = OnDemand(tmp_path / "capture", Spool(tmp_path / "spool"), {"host": "h", "source": "tracedoc-agent"},
                         deliver=lambda job: shipped.append(job()), ebpf=settings)
    return on_demand, shipped


def wait_for(on_demand, seconds=20.0):
    deadline = time.monotonic() + seconds
    while on_demand.outstanding and time.monotonic() < deadline:
        on_demand.poll()
        time.sleep(0.05)
    assert not on_demand.outstanding


def stand_in(tmp_path, endless: bool = False):
    """A bpftrace that keeps the program it was given, prints futex waits as host_stalls.bt does
    (endlessly: until interrupted, then its histogram), and a libcudart file to probe."""
    libcudart = tmp_path / "lib" / "libcudart.so.12"
    libcudart.parent.mkdir()
    libcudart.write_bytes(b"\x7fELF")
    fake = _executable(tmp_path / "bpftrace", f"""
        import pathlib, signal, sys, time
        pathlib.Path({str(tmp_path / "program.bt")!r}).write_text(pathlib.Path(sys.argv[-1]).read_text())
        def maps(*_):
            sys.stdout.write("\\n@futex_wait_us: \\n[4K, 8K)    {LINES} |@@@@@@@@@@@@@@@@@@@@|\\n")
            sys.stdout.flush()
            sys.exit(0)
        signal.signal(signal.SIGINT, maps)
        print("Attaching 4 probes...")
        now = time.monotonic_ns()
        n = 0
        while {endless} or n < {LINES}:
            n += 1
            sys.stdout.write(f"{{now + n * 1000000}} tid=7 pid=7 futex_wait_us=5000\\n")
        maps()
    """)
    settings = EbpfOrderSettings(libcudart=str(libcudart), reason=lambda _: None,
                                 run=functools.partial(ebpf.run_capture, bpftrace=str(fake), poll_s=0.05))
    return settings, libcudart


def members(bundle) -> dict[str, bytes]:
    with tarfile.open(bundle.path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def test_an_ebpf_order_is_one_window_shipped_with_its_clock_and_parsed_as_waits(tmp_path):
    settings, libcudart = stand_in(tmp_path)
    on_demand, shipped = on_demand_with(tmp_path, settings)
    on_demand.take([{"id": 21, "kind": "ebpf", "duration_s": 2, "expires_in": 3600}])
    assert not (tmp_path / "capture" / "requests" / "21.json").exists()  # no program hook involved
    wait_for(on_demand)
    [bundle] = shipped
    assert bundle.meta["labels"]["capture_kind"] == "ebpf" and bundle.meta["labels"]["capture_request"] == "21"
    files = members(bundle)
    assert set(files) == {"capture/host_stalls_h.bpftrace.txt", "capture/tracedoc-clock.json"}
    offsets = json.loads(files["capture/tracedoc-clock.json"])["offsets_ns"]
    assert abs(offsets["host_stalls_h.bpftrace.txt"] - (time.time_ns() - time.monotonic_ns())) < 60 * 10**9

    program = (tmp_path / "program.bt").read_text()
    assert f"uprobe:{libcudart}:cudaStreamSynchronize" in program and "cudaLaunchKernel" not in program
    assert "2000" in program and "{{" not in program   # the order's window, in ms; nothing left unfilled
    out = tmp_path / "host_stalls_h.bpftrace.txt"
    out.write_bytes(files["capture/host_stalls_h.bpftrace.txt"])
    result, df = _parse(out, tmp_path)
    assert result.format == "bpftrace"
    assert len(df[(df.kind == "sync") & (df.name == "futex_wait")]) == LINES
    assert on_demand.failed == {}


def test_an_ebpf_order_stays_within_its_window_and_bytes(tmp_path):
    settings, _ = stand_in(tmp_path, endless=True)
    on_demand, shipped = on_demand_with(tmp_path, settings)
    on_demand.take([{"id": 22, "kind": "ebpf", "duration_s": 10 * MAX_DURATION_S, "max_bytes": 100_000}])
    wait_for(on_demand)
    data = members(shipped[0])["capture/host_stalls_h.bpftrace.txt"]
    assert len(data) <= 100_000 + ebpf.MAPS_ALLOWANCE and data.rstrip().endswith(b"|")  # its histogram kept
    assert f"{int(MAX_DURATION_S * 1000)}" in (tmp_path / "program.bt").read_text()  # the window's ceiling


def test_without_bpftrace_the_order_fails_at_once_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # a host without bpftrace
    on_demand, shipped = on_demand_with(tmp_path, EbpfOrderSettings())
    on_demand.take([{"id": 23, "kind": "ebpf", "duration_s": 30}])
    started = time.monotonic()
    wait_for(on_demand)
    assert time.monotonic() - started < 5 and shipped == []
    assert on_demand.failed["23"] == ("no eBPF capture on this host: bpftrace is not installed (not on PATH): "
                                      "install it (apt install bpftrace) for eBPF captures")


def test_an_agent_that_may_not_trace_says_so(tmp_path):
    settings = EbpfOrderSettings(reason=lambda _: ebpf.privilege_reason(euid=1000, caps=0))
    on_demand, shipped = on_demand_with(tmp_path, settings)
    on_demand.take([{"id": 24, "kind": "ebpf"}])
    wait_for(on_demand)
    assert shipped == [] and on_demand.failed["24"].startswith("no eBPF capture on this host: no privilege to trace")
    assert "CAP_BPF" in on_demand.failed["24"]


def test_a_bpftrace_that_fails_to_attach_fails_the_order_with_its_error(tmp_path):
    settings, _ = stand_in(tmp_path)
    fake = _executable(tmp_path / "bpftrace", """
        import sys
        print("prog.bt:1:1-36: ERROR: tracepoint not found: syscalls:sys_enter_futex")
        sys.exit(1)
    """)
    settings = EbpfOrderSettings(libcudart=settings.libcudart, reason=lambda _: None,
                                 run=functools.partial(ebpf.run_capture, bpftrace=str(fake), poll_s=0.05))
    on_demand, shipped = on_demand_with(tmp_path, settings)
    on_demand.take([{"id": 25, "kind": "ebpf", "duration_s": 1}])
    wait_for(on_demand)
    assert shipped == [] and on_demand.failed["25"].endswith("ERROR: tracepoint not found: syscalls:sys_enter_futex")


def test_a_real_ebpf_order_where_this_host_may_trace(tmp_path):
    if (reason := ebpf.unavailable_reason(cuda=True)) is not None:
        pytest.skip(f"eBPF capture unavailable here: {reason}")
    on_demand, shipped = on_demand_with(tmp_path, EbpfOrderSettings())
    on_demand.take([{"id": 26, "kind": "ebpf", "duration_s": 2}])
    wait_for(on_demand, seconds=60)
    assert on_demand.failed == {}, on_demand.failed
    out = tmp_path / "host_stalls_h.bpftrace.txt"
    out.write_bytes(members(shipped[0])["capture/host_stalls_h.bpftrace.txt"])
    result, _ = _parse(out, tmp_path)
    assert result.format == "bpftrace"
