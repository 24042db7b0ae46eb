"""The eBPF capture window (agent/ebpf.py, agent/host_stalls.bt): the program it generates,
each reason it gives for not running, its bounds (window, output size, process group), and a
real bpftrace run on a Python process where this host has bpftrace and the privilege, parsed
by the server's bpftrace parser."""
from __future__ import annotations

import json
import mmap
import os
import re
import signal
import subprocess
import sys
import tarfile
import textwrap
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from agent import ebpf
from agent.spool import Spool
from ingest.engine.artifact_results import parse_one
from ingest.engine.bundle import expand

ROOT = Path(__file__).resolve().parents[2]


def _parse(path: Path, workdir: Path):
    result = parse_one(path.name, path, workdir)
    assert not result.error, result.error
    return result, pq.read_table(result.parquet).to_pandas()


def _executable(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def _gil_program(seconds: float) -> str:
    """Python threads queueing for the GIL: futex waits at the 5 ms switch interval."""
    return textwrap.dedent(f"""
        import sys, threading, time
        def spin():
            end = time.time() + {seconds}
            while time.time() < end:
                sum(range(2000))
        threads = [threading.Thread(target=spin) for _ in range(3)]
        [t.start() for t in threads]
        print("ready", flush=True)
        [t.join() for t in threads]
    """)


# -- the program ---------------------------------------------------------------------------------


def test_program_probes_libcudart_and_futex_waits(tmp_path):
    lib = tmp_path / "libcudart.so.12"
    lib.write_bytes(b"\x7fELF")
    text = ebpf.render_program(2.5, lib, pids=[4321, 17], min_us=80, launches=True)
    for call in ("cudaLaunchKernel", "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize"):
        assert f"uprobe:{lib}:{call}" in text and f"uretprobe:{lib}:{call}" in text
    # launches only when asked: each probed call costs microseconds
    default = ebpf.render_program(2.5, lib, pids=[4321, 17], min_us=80)
    assert "cudaLaunchKernel" not in default and "@launch_t0" not in default
    assert f"uretprobe:{lib}:cudaStreamSynchronize" in default
    assert "/ pid == 17 || pid == 4321 /" in text  # CUDA calls of the named processes only
    assert "/ (pid == 17 || pid == 4321) && ((args->op & 127) == 0" in text
    assert "interval:ms:2500" in text and "$us >= 80" in text
    assert "{{" not in text and "//" not in text  # filled, comments left in the vendored file
    # without pids: every process's CUDA calls; futex waits of the processes seen calling CUDA
    every = ebpf.render_program(10, lib)
    assert "CUDA_FILTER" not in every and "pid ==" not in every
    assert "/ (@cuda_pids[pid]) && " in every
    assert every.count("{") == every.count("}")


def test_futex_only_program_needs_pids_and_has_no_cuda_probe():
    text = ebpf.render_program(1, None, pids=[99])
    assert "uprobe" not in text and "@cuda_pids" not in text and "@launch_t0" not in text
    assert "tracepoint:syscalls:sys_enter_futex" in text and "clear(@futex_t0)" in text
    with pytest.raises(ValueError, match="needs the pids"):
        ebpf.render_program(1, None)


@pytest.mark.parametrize("kwargs, message", [
    ({"libcudart": "/opt/my cuda/libcudart.so"}, "only letters"),
    ({"libcudart": "/x/libcudart.so:evil"}, "only letters"),
    ({"libcudart": "/x/libcudart.so\n} BEGIN { system(\"id\")"}, "only letters"),
    ({"libcudart": None, "pids": [0]}, "positive integers"),
    ({"libcudart": None, "pids": list(range(1, 100))}, "at most 64"),
    ({"libcudart": None, "pids": [5], "min_us": -1}, "min_us"),
])
def test_program_refuses_what_cannot_go_into_it(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ebpf.render_program(1, **kwargs)
    with pytest.raises(ValueError, match="between 0 and 24 h"):
        ebpf.render_program(0, None, [5])


def test_the_programs_lines_parse_into_events(tmp_path):
    """Every printf of the program, filled as bpftrace would, is read by the server's parser:
    futex and synchronize waits as `sync` rows, launches as spans, each with its thread."""
    text = ebpf.render_program(5, "/usr/lib/libcudart.so.12", pids=[1000], launches=True)
    formats = re.findall(r'printf\("([^"]*)\\n"', text)
    assert len(formats) == 5  # launch, three synchronize returns, futex
    lines = ["Attaching 11 probes..."]
    for i, fmt in enumerate(formats):
        ts, us = 5_000_000_000 + i * 1_000_000, 100 + i
        lines.append(fmt.replace("%llu", str(ts), 1).replace("%d", str(2000 + i), 1).replace("%d", "1000", 1)
                     .replace("%llu", str(us), 1))
    lines += ["", "@futex_wait_us: ", "[64, 128)              3 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|", ""]
    out = tmp_path / "host_stalls.bpftrace.txt"
    out.write_text("\n".join(lines) + "\n")
    result, df = _parse(out, tmp_path)
    assert result.format == "bpftrace"
    rows = df[df.kind.isin(["sync", "span"])].sort_values("ts")
    assert list(rows.name) == ["cuda_launch", "cuda_sync_wait", "cuda_sync_wait", "cuda_sync_wait", "futex_wait"]
    assert list(rows.kind) == ["span", "sync", "sync", "sync", "sync"]
    assert list(rows.tid) == [2000, 2001, 2002, 2003, 2004] and set(rows.pid) == {1000}
    assert [json.loads(a).get("call") for a in rows["attrs"]][1:4] == [
        "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize"]
    assert list(rows.dur) == [100_000, 101_000, 102_000, 103_000, 104_000]
    assert df[(df.kind == "sample") & (df.name == "futex_wait_us")].value.tolist() == [3.0]


# -- why it cannot run ---------------------------------------------------------------------------


def _fake_bpftrace_dir(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    _executable(bin_dir / "bpftrace", "import sys; sys.exit(0)\n")
    bin_dir.chmod(0o755)
    tmp_path.chmod(0o755)
    return bin_dir


def _tracefs(tmp_path: Path) -> Path:
    root = tmp_path / "tracing"
    (root / "events" / "syscalls" / "sys_enter_futex").mkdir(parents=True)
    return root


def test_reason_no_bpftrace_on_path(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    reason = ebpf.unavailable_reason(path_env=str(empty))
    assert reason.startswith("bpftrace is not installed")


def test_reason_no_privilege(tmp_path):
    """A real unprivileged process: as root, the check runs in a child that dropped to nobody
    (losing every capability: the kernel's CapEff says so); otherwise in a child as this user."""
    code = (f"import os, sys; sys.path.insert(0, {str(ROOT)!r}); from agent import ebpf; "  # imported as root
            + ("os.setgroups([]); os.setgid(65534); os.setuid(65534); " if os.geteuid() == 0 else "")
            + "print(ebpf.privilege_reason())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("no privilege to trace (uid "), out.stdout


def test_privilege_from_capabilities():
    cap = lambda *bits: sum(1 << b for b in bits)  # noqa: E731
    assert ebpf.privilege_reason(euid=1000, caps=cap(ebpf.CAP_BPF, ebpf.CAP_PERFMON)) is None
    assert ebpf.privilege_reason(euid=1000, caps=cap(ebpf.CAP_SYS_ADMIN)) is None
    assert "CAP_BPF+CAP_PERFMON" in ebpf.privilege_reason(euid=1000, caps=cap(ebpf.CAP_BPF))
    assert ebpf.privilege_reason(euid=0, caps=0) is not None  # root without capabilities (a user namespace)
    assert ebpf.effective_capabilities() is not None  # this host's /proc says


@pytest.mark.parametrize("content, blocked", [
    ("[none] integrity confidentiality\n", False),
    ("none [integrity] confidentiality\n", False),
    ("none integrity [confidentiality]\n", True),
])
def test_reason_kernel_lockdown(tmp_path, content, blocked):
    lockdown = tmp_path / "lockdown"  # the format of /sys/kernel/security/lockdown
    lockdown.write_text(content)
    reason = ebpf.lockdown_reason(lockdown)
    assert (reason is not None) == blocked
    if blocked:
        assert "confidentiality" in reason
    assert ebpf.lockdown_reason(tmp_path / "absent") is None  # no lockdown LSM


def test_reason_tracefs_not_mounted(tmp_path):
    assert ebpf.tracefs_reason([tmp_path / "nothing"]).startswith("tracefs is not mounted")
    assert ebpf.tracefs_reason([tmp_path / "nothing", _tracefs(tmp_path)]) is None


def test_libcudart_found_in_a_process_or_not_at_all(tmp_path):
    """The library a process maps is the one to probe: this test process maps a file named
    libcudart.so.12 for real and finds it in its own /proc maps."""
    nowhere = [str(tmp_path / "none" / "libcudart.so*")]
    assert ebpf.find_libcudart([os.getpid()], globs=nowhere) is None
    fake = tmp_path / "lib" / "libcudart.so.12.4.127"
    fake.parent.mkdir()
    fake.write_bytes(b"\0" * 4096)
    with open(fake, "rb") as f, mmap.mmap(f.fileno(), 4096, prot=mmap.PROT_READ):
        assert ebpf.libcudart_in_process(os.getpid()) == fake
        assert ebpf.find_libcudart([os.getpid()], globs=nowhere) == fake
    assert ebpf.find_libcudart([], globs=[str(tmp_path / "lib" / "libcudart.so*")]) == fake.resolve()


def test_reason_libcudart_not_found(tmp_path):
    if ebpf.privilege_reason() is not None:
        pytest.skip(f"the checks before it stop first here: {ebpf.privilege_reason()}")
    bin_dir, tracefs = _fake_bpftrace_dir(tmp_path), _tracefs(tmp_path)
    kw = dict(path_env=str(bin_dir), lockdown=tmp_path / "no-lockdown", tracefs=[tracefs],
              globs=[str(tmp_path / "none" / "libcudart.so*")])
    reason = ebpf.unavailable_reason(pids=[os.getpid()], **kw)
    assert reason.startswith("libcudart not found") and "--ebpf-libcudart" in reason
    assert "does not exist" in ebpf.unavailable_reason(libcudart=tmp_path / "gone.so", **kw)
    assert ebpf.unavailable_reason(cuda=False, pids=[os.getpid()], **kw) is None  # futex-only needs none


def test_cli_says_why_in_one_line(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    out = subprocess.run([sys.executable, "-m", "agent.main", "ebpf", "--duration", "1", "--output",
                          str(tmp_path / "out.txt")], capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={**os.environ, "PATH": str(empty)})
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "tracedoc-agent: eBPF capture unavailable: bpftrace is not installed (not on PATH): install it "
        "(apt install bpftrace) for eBPF captures"]
    assert not (tmp_path / "out.txt").exists()


def test_spool_capture_logs_the_reason_and_adds_nothing(tmp_path, monkeypatch, caplog):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # a host without bpftrace
    spool = Spool(tmp_path / "spool")
    caplog.set_level("WARNING", logger="agent.ebpf")
    thread = ebpf.start_ebpf_thread(ebpf.EbpfOptions(window_s=1, every_s=2), spool, threading.Event())
    thread.join(10)
    assert not thread.is_alive()  # said once, no retry every window
    assert [r.getMessage() for r in caplog.records] == [
        "eBPF capture unavailable: bpftrace is not installed (not on PATH): install it (apt install bpftrace) "
        "for eBPF captures"]
    assert spool.pending_chunks() == []


# -- bounds --------------------------------------------------------------------------------------


def _state(pid: int) -> str | None:
    try:
        return re.search(r"^State:\s+(\w)", Path(f"/proc/{pid}/status").read_text(), re.M).group(1)
    except (OSError, AttributeError):
        return None


def test_window_bound_kills_the_process_group(tmp_path):
    """A bpftrace that never exits and ignores SIGINT, with a child of its own: both are gone
    once the window, the attach grace and the exit grace have passed."""
    child_pid = tmp_path / "child.pid"
    fake = _executable(tmp_path / "bpftrace", f"""
        import signal, subprocess, sys, time
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(child_pid)!r}, "w").write(str(child.pid))
        print("Attaching 2 probes...", flush=True)
        n = 0
        while True:
            n += 1
            print(f"{{1000000 + n}} tid=7 futex_wait_us=5000", flush=True)
            time.sleep(0.05)
    """)
    t0 = time.monotonic()
    result = ebpf.run_capture("BEGIN {}", tmp_path / "out.txt", duration_s=0.5, bpftrace=str(fake),
                              attach_grace_s=0.5, exit_grace_s=0.5, poll_s=0.05)
    assert time.monotonic() - t0 < 5
    assert result.exit_code == -signal.SIGKILL
    assert any("killed" in n for n in result.notes)
    assert result.events > 3
    pid = int(child_pid.read_text())
    for _ in range(50):
        if _state(pid) in (None, "Z"):
            break
        time.sleep(0.05)
    assert _state(pid) in (None, "Z")  # dead (a zombie until its new parent reaps it)


def test_output_bound_interrupts_and_keeps_the_histograms(tmp_path):
    fake = _executable(tmp_path / "bpftrace", """
        import signal, sys
        def maps(*_):
            sys.stdout.write("\\n@futex_wait_us: \\n[4K, 8K)    12 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\\n")
            sys.stdout.flush()
            sys.exit(0)
        signal.signal(signal.SIGINT, maps)
        print("Attaching 2 probes...")
        n = 0
        while True:
            n += 1
            sys.stdout.write(f"{1000000 + n} tid=7 pid=7 futex_wait_us=5000\\n")
    """)
    result = ebpf.run_capture("BEGIN {}", tmp_path / "out.txt", duration_s=30, max_bytes=200_000,
                              bpftrace=str(fake), poll_s=0.05)
    size = result.path.stat().st_size
    assert result.truncated and size <= 200_000 + ebpf.MAPS_ALLOWANCE
    assert result.exit_code == 0  # it printed its maps on SIGINT and exited
    text = result.path.read_text()
    assert text.rstrip().endswith("|@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|")
    _, df = _parse(result.path, tmp_path)
    assert (df.name == "futex_wait_us").sum() == 1 and (df.name == "futex_wait").sum() == result.events


def test_a_cut_far_past_the_bound_keeps_the_maps_printed_at_exit(tmp_path):
    out = tmp_path / "out.txt"
    maps = b"\n@futex_wait_us: \n[4K, 8K)    12 |@@@@|\n\n@malloc_bytes: \n[1K, 2K)   3 |@|\n"
    events = b"".join(b"%d tid=1 futex_wait_us=9\n" % (10**6 + i) for i in range(150_000))  # ~4 MB
    out.write_bytes(events + maps)
    ebpf._cut_keeping_maps(out, 100_000)
    data = out.read_bytes()
    assert data.endswith(maps) and len(data) <= 100_000 + len(maps)
    lines = data[:-len(maps)].splitlines()
    assert lines and all(re.fullmatch(rb"\d+ tid=1 futex_wait_us=9", line) for line in lines)


def test_cut_at_a_line(tmp_path):
    out = tmp_path / "out.txt"
    out.write_bytes(b"".join(b"%d tid=1 futex_wait_us=9\n" % (10**6 + i) for i in range(10_000)))
    ebpf._cut_at_line(out, 100_000)
    data = out.read_bytes()
    assert len(data) <= 100_000 and data.endswith(b"\n")
    assert all(re.fullmatch(rb"\d+ tid=1 futex_wait_us=9", line) for line in data.splitlines())


def test_a_failing_bpftrace_gives_its_error(tmp_path):
    fake = _executable(tmp_path / "bpftrace", """
        import sys
        print("ERROR: Unknown error -1: couldn't set RLIMIT_MEMLOCK for bpftrace.")
        print("prog.bt:1:1-36: ERROR: tracepoint not found: syscalls:sys_enter_futex")
        sys.exit(1)
    """)
    result = ebpf.run_capture("BEGIN {}", tmp_path / "out.txt", 5, bpftrace=str(fake), poll_s=0.05)
    assert result.exit_code == 1 and result.events == 0
    assert result.error.endswith("ERROR: tracepoint not found: syscalls:sys_enter_futex")


# -- for real, where this host allows it ---------------------------------------------------------


def _start_target(tmp_path: Path, code: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _ebpf_cli_on(target: subprocess.Popen, tmp_path: Path, cuda: bool, args: list[str]):
    """`tracedoc-agent ebpf` for 2 s on `target` (killed after), or the test skipped with the
    reason this host gives."""
    try:
        if (reason := ebpf.unavailable_reason(cuda=cuda, pids=[target.pid])) is not None:
            pytest.skip(f"eBPF capture unavailable here: {reason}")
        out = tmp_path / "host_stalls.bpftrace.txt"
        run = subprocess.run([sys.executable, "-m", "agent.main", "ebpf", "--duration", "2", "--ebpf-pid",
                              str(target.pid), "--output", str(out), "--cpus", "none", *args],
                             capture_output=True, text=True, timeout=90, cwd=ROOT)
    finally:
        target.kill()
        target.wait()
    assert run.returncode == 0, run.stderr
    return out, run


def test_real_bpftrace_on_a_python_process(tmp_path):
    """`tracedoc-agent ebpf` on Python threads queueing for the GIL: futex waits per thread,
    parsed by the server's parser into `sync` rows of that process's threads."""
    target = _start_target(tmp_path, _gil_program(20))
    tids = {int(t) for t in os.listdir(f"/proc/{target.pid}/task")}
    out, run = _ebpf_cli_on(target, tmp_path, cuda=False, args=["--ebpf-futex-only"])
    result, df = _parse(out, tmp_path)
    assert result.format == "bpftrace"
    waits = df[(df.kind == "sync") & (df.name == "futex_wait")]
    assert len(waits) > 20, run.stderr
    assert set(waits.tid) <= tids and len(set(waits.tid)) >= 2 and set(waits.pid) == {target.pid}
    assert waits.dur.min() >= ebpf.DEFAULT_MIN_US * 1000
    hist = df[(df.kind == "sample") & (df.name == "futex_wait_us")]
    assert len(hist) == 1 and hist.value.iloc[0] >= len(waits)  # every wait, short ones too


def test_real_bpftrace_cuda_probes(tmp_path):
    """The libcudart uprobes for real: a process calls cudaDeviceSynchronize through the
    library (without a GPU it fails at once, but the probe still fires)."""
    lib = ebpf.find_libcudart()
    if lib is None:
        pytest.skip("no libcudart on this host")
    code = textwrap.dedent(f"""
        import ctypes, time
        cudart = ctypes.CDLL({str(lib)!r})
        print("ready", flush=True)
        end = time.time() + 20
        while time.time() < end:
            cudart.cudaDeviceSynchronize()
            time.sleep(0.01)
    """)
    target = _start_target(tmp_path, code)
    out, _ = _ebpf_cli_on(target, tmp_path, cuda=True, args=["--ebpf-min-us", "0"])
    _, df = _parse(out, tmp_path)
    syncs = df[(df.kind == "sync") & (df.name == "cuda_sync_wait")]
    assert len(syncs) > 20 and set(syncs.pid) == {target.pid}
    assert {json.loads(a)["call"] for a in syncs["attrs"]} == {"cudaDeviceSynchronize"}


def test_real_capture_ships_in_the_bundle_with_its_clock(tmp_path):
    """`run --ebpf`'s path: a window into the spool, bundled; the server's bundle reader finds
    the capture and the clock file that puts its monotonic timestamps on the wall clock."""
    target = _start_target(tmp_path, _gil_program(20))
    try:
        if (reason := ebpf.unavailable_reason(cuda=False, pids=[target.pid])) is not None:
            pytest.skip(f"eBPF capture unavailable here: {reason}")
        spool = Spool(tmp_path / "spool")
        opts = ebpf.EbpfOptions(window_s=1.5, pids=(target.pid,), cuda=False)
        before = time.time_ns()
        result = ebpf.capture_into_spool(opts, spool, threading.Event())
    finally:
        target.kill()
        target.wait()
    assert result is not None and result.events > 0
    bundle = spool.make_bundle({"host": "test"})
    with tarfile.open(bundle.path) as tar:
        names = tar.getnames()
    capture = next(n for n in names if n.endswith(".bpftrace.txt"))
    assert capture.startswith("ebpf/host_stalls-") and any(n.endswith("/tracedoc-clock.json") for n in names)
    with expand([bundle.path], tmp_path / "expanded") as members:
        artifact = next(m for m in members if m.name.endswith(".bpftrace.txt"))
        offset = members.clock_offsets[Path(capture).name]
        assert abs(offset - (time.time_ns() - time.monotonic_ns())) < 50_000_000
        _, df = _parse(artifact.path, tmp_path)
    first_wall = int(df[df.kind == "sync"].ts.min()) + offset
    assert before - 1_000_000_000 < first_wall < time.time_ns()  # lined up with the wall clock
