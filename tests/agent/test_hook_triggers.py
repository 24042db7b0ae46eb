"""The hook's triggers (agent.hook): a capture taken at the next occurrence, not at once, with
its bounds. Real torch on the CPU for the profiler; a controlled clock stands in for step time."""
import gzip
import json
import random
import statistics
import threading
import time

import pytest

from agent.hook import MAX_WINDOWS, CaptureHook, StepTimes, folders, write_json


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def order(tmp_path, **fields):
    requests, _, _ = folders(tmp_path / "capture")
    write_json(requests / f"{fields['id']}.json", fields)


def done(tmp_path, rid):
    path = tmp_path / "capture" / "results" / f"{rid}.done.json"
    return json.loads(path.read_text()) if path.exists() else None


def run_steps(hook, clock, durations):
    for d in durations:
        clock.now += d
        hook.step()


def test_the_running_median_is_the_median_of_the_recent_steps():
    times, rng = StepTimes(size=16), random.Random(3)
    values = [rng.uniform(0, 1) for _ in range(100)]
    for i, v in enumerate(values):
        times.add(v)
        recent = values[max(0, i - 15):i + 1]
        expected = sorted(recent)[len(recent) // 2] if len(recent) >= 8 else None
        assert times.median() == expected


def test_a_slow_step_order_waits_then_profiles_a_window_that_holds_a_slow_step(tmp_path):
    pytest.importorskip("torch")
    clock = Clock()
    hook = CaptureHook(tmp_path / "capture", poll_every=0, clock=clock)
    order(tmp_path, id=3, kind="profiler", trigger="slow_step", steps=6, factor=1.5, expires_in=600)
    run_steps(hook, clock, [0.01] * 20)                 # calm steps: armed, nothing captured
    assert hook._armed == "slow_step" and hook._profiler is None and done(tmp_path, 3) is None
    # the spike comes back every 4th step: the window opened by the first one holds the next
    run_steps(hook, clock, [0.05] + [0.01, 0.01, 0.01, 0.05, 0.01, 0.01])
    result = done(tmp_path, 3)
    assert result["error"] == "" and len(result["files"]) == 1 and result["files"][0].endswith(".json.gz")
    trace = json.load(gzip.open(tmp_path / "capture" / "results" / "3" / result["files"][0]))
    steps = [e for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    assert len(steps) >= 5  # the window's steps are annotated: the server reads them as steps


def test_windows_without_a_slow_step_are_dropped_and_the_order_gives_up_after_a_few(tmp_path):
    pytest.importorskip("torch")
    clock = Clock()
    hook = CaptureHook(tmp_path / "capture", poll_every=0, clock=clock)
    order(tmp_path, id=5, kind="profiler", trigger="slow_step", steps=4, factor=1.5, expires_in=600)
    run_steps(hook, clock, [0.01] * 10)
    for _ in range(MAX_WINDOWS):  # a one-off spike, then calm windows
        run_steps(hook, clock, [0.05] + [0.01] * 4)
    result = done(tmp_path, 5)
    assert result["files"] == [] and "did not come back" in result["error"]
    assert hook._profiler is None and hook._current is None


def test_an_armed_order_expires_without_an_occurrence(tmp_path):
    clock = Clock()
    hook = CaptureHook(tmp_path / "capture", poll_every=0, clock=clock)
    order(tmp_path, id=9, kind="profiler", trigger="slow_step", steps=4, expires_in=30)
    run_steps(hook, clock, [1.0] * 29)
    assert done(tmp_path, 9) is None
    run_steps(hook, clock, [1.0] * 3)
    assert "no occurrence of slow_step within 30 s" in done(tmp_path, 9)["error"]


def test_a_capture_over_its_byte_bound_is_dropped_with_the_reason(tmp_path):
    pytest.importorskip("torch")
    clock = Clock()
    hook = CaptureHook(tmp_path / "capture", poll_every=0, clock=clock)
    order(tmp_path, id=2, kind="profiler", trigger="now", steps=2, max_bytes=100)
    run_steps(hook, clock, [0.01] * 4)
    result = done(tmp_path, 2)
    assert result["files"] == [] and "over the order's bound of 100" in result["error"]
    assert list((tmp_path / "capture" / "results" / "2").iterdir()) == []


def test_a_stall_order_fires_from_its_watchdog_while_the_loop_is_stuck(tmp_path):
    """The dump itself needs NCCL; here the watchdog's firing is what is checked: the answer
    comes from its thread while no step() runs, and names why the dump could not be taken."""
    hook = CaptureHook(tmp_path / "capture", poll_every=0)
    order(tmp_path, id=4, kind="flight_recorder", trigger="stalled_step", stall_s=1, expires_in=600)
    hook.step()
    hook.step()
    assert hook._armed == "stalled_step"
    deadline = time.monotonic() + 10
    while done(tmp_path, 4) is None and time.monotonic() < deadline:
        time.sleep(0.1)  # the "stuck" loop: no step() call
    result = done(tmp_path, 4)
    assert result is not None and hook._current is None
    assert result["files"] == ["nccl_trace_rank_0"] or result["error"]  # with NCCL a dump, else why not
    assert not any(t.name == "tracedoc-stall-watch" and t.is_alive() for t in threading.enumerate())


def test_an_armed_hook_costs_one_clock_read_and_a_comparison_per_step(tmp_path):
    """Not a benchmark: a bound that would catch an armed step doing real work (a file read,
    an import): both loops below run the same calls, one armed, one idle."""
    clock = Clock()
    armed = CaptureHook(tmp_path / "a", poll_every=3600, clock=clock)
    order_path = tmp_path / "a"
    write_json(folders(order_path)[0] / "1.json", {"id": 1, "kind": "profiler", "trigger": "slow_step",
                                                   "factor": 100.0, "expires_in": 10**9})
    armed.step()
    assert armed._armed == "slow_step"
    idle = CaptureHook(None, clock=clock)

    def per_step(hook):
        runs = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(20_000):
                clock.now += 0.01
                hook.step()
            runs.append((time.perf_counter() - start) / 20_000)
        return statistics.median(runs)
    assert per_step(armed) < 20e-6  # microseconds, against steps of milliseconds
    assert per_step(idle) < 20e-6
