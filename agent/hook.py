"""The program side of on-demand captures: a hook a training or serving loop calls once per
step, which runs the captures people (or the closed loop) ask for from the tracedoc server.

    from agent.hook import CaptureHook
    hook = CaptureHook()          # inert unless TRACEDOC_CAPTURE_DIR is set (`tracedoc-agent wrap` sets it)
    for batch in loader:
        step(batch)
        hook.step()

The agent writes each request as `requests/<id>.json` in the capture folder. The first process
whose hook sees it claims it (renames it into `taken/`, so one process of many takes it), runs
it, and writes what it captured into `results/<id>/` and then `results/<id>.done.json` (the
files, or why it failed); the agent ships the folder as a trace. Kinds:

  profiler         `torch.profiler` over `steps` calls of step(), CPU and (where there is one)
                   CUDA activity, exported as a gzipped Chrome trace
  flight_recorder  the NCCL flight recorder's entries (the format of the dumps written on a
                   watchdog timeout)
  memory_snapshot  `torch.cuda.memory._snapshot()` with the allocation history recorded since
                   the request was armed

and when (`trigger`):

  now           at once
  slow_step     at the next occurrence of a slow step: once a step takes `factor` x the running
                median of the last 64, profiler windows of `steps` steps are taken until one holds
                a step `factor` x its own median (a window without one is dropped; at most
                MAX_WINDOWS), so the capture shows a slow step, not the calm after it
  stalled_step  when step() has not been called for `stall_s` (a hang inside a collective): a
                watchdog thread dumps the flight recorder while the loop is stuck
  oom           at the next CUDA out-of-memory (an allocator OOM observer): memory history is
                recorded while armed, bounded to HISTORY_ENTRIES allocations

A request waits for its occurrence at most `expires_in` seconds, and what it captured is
dropped past `max_bytes`. Armed or not, step() costs a clock read, a store into a ring of step
times and two comparisons; the slow-step threshold is recomputed once per lap of the ring, new
requests and expiry looked at once per `poll_every` s. Only the standard library is imported until a capture
runs (then torch).
"""
from __future__ import annotations

import gzip
import json
import logging
import math
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)

ENV_VAR = "TRACEDOC_CAPTURE_DIR"
PROFILER, FLIGHT_RECORDER, MEMORY_SNAPSHOT = "profiler", "flight_recorder", "memory_snapshot"
RECENT_STEPS = 64          # the running median of step times is over this many steps
MIN_STEPS_FOR_MEDIAN = 8   # before this many steps nothing is slow
MAX_WINDOWS = 3            # profiler windows tried for one slow_step request
MIN_EXCESS_S = 0.001       # a slow step is also at least this much over the median
HISTORY_ENTRIES = 100_000  # allocation records kept while an oom request is armed
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


def folders(root: Path) -> tuple[Path, Path, Path]:
    """requests/, taken/, results/ of a capture folder (made if missing)."""
    dirs = (root / "requests", root / "taken", root / "results")
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    return dirs


def write_json(path: Path, value: dict) -> None:
    """Whole or not at all: a reader polling the folder never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


def take_order(results: Path, rid: int, capture: Callable[[Path], list[str]],
               unavailable: type[Exception], why: str) -> None:
    """An order the agent takes itself (nvml_burst, ebpf): `capture` writes into `results/<rid>/`
    and names its files; the outcome lands in `results/<rid>.done.json`, with `why: reason`
    when the host cannot take it (`unavailable`), or the error. A capture never takes the agent
    down: the reason goes back to the server."""
    out = results / str(rid)
    out.mkdir(parents=True, exist_ok=True)
    try:
        files, error = capture(out), ""
    except unavailable as e:
        files, error = [], f"{why}: {e}"
    except Exception as e:
        log.exception("capture %s failed", rid)
        files, error = [], f"{type(e).__name__}: {e}"
    write_json(results / f"{rid}.done.json", {"id": rid, "files": files, "error": error})


class StepTimes:
    """The last RECENT_STEPS step times in a ring. add() is one store: the median is sorted out
    only when asked, which the hook does once per lap of the ring, not once per step."""

    def __init__(self, size: int = RECENT_STEPS):
        self.ring = [0.0] * size
        self.count = 0

    def add(self, seconds: float) -> None:
        self.ring[self.count % len(self.ring)] = seconds
        self.count += 1

    def median(self) -> float | None:
        recent = sorted(self.ring[:self.count])  # the whole ring once it is full
        return recent[len(recent) // 2] if len(recent) >= MIN_STEPS_FOR_MEDIAN else None


class CaptureHook:
    def __init__(self, root: str | os.PathLike | None = None, poll_every: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        root = root if root is not None else os.environ.get(ENV_VAR)
        self.root = Path(root) if root else None
        if self.root:
            self.requests, self.taken, self.results = folders(self.root)
        self.poll_every, self.clock = poll_every, clock
        self._next_poll = 0.0
        self._profiler = None
        self._current: dict | None = None   # the request being captured or armed
        self._armed: str = ""               # the trigger it waits for ("" when none)
        self._deadline = 0.0
        self._steps_left = 0
        self._windows = 0
        self._last_step = clock()   # the first step() measures from the hook's creation
        self._times = StepTimes()
        self._slow_above = math.inf  # a step longer than this opens a profiler window (slow_step armed)
        self._window_times: list[float] = []
        self._lock = threading.Lock()        # the stall watchdog and step() finish a request once
        self._watchdog: threading.Thread | None = None
        self._oom_hooked = False

    def step(self) -> None:
        """Call once per step of the loop. Armed or idle it costs a clock read, a store and two
        comparisons; the slow-step threshold is recomputed once per lap of the step ring, the
        requests folder and the order's expiry looked at once per `poll_every` s."""
        now = self.clock()
        took = now - self._last_step
        self._last_step = now
        if self._profiler is not None:
            self._profiling_step(took)
            return
        if took > self._slow_above:  # inf unless a slow_step order is armed
            self._start_window()
            return
        times = self._times
        times.add(took)
        if times.count % RECENT_STEPS == 0 or times.count == MIN_STEPS_FOR_MEDIAN:
            self._set_slow_threshold()
        if now >= self._next_poll:
            self._next_poll = now + self.poll_every
            self._poll(now)

    def _set_slow_threshold(self) -> None:
        """A slow step takes `factor` x the running median, and 1 ms over it: microseconds of
        jitter in a tight loop are not a slow step."""
        median = self._times.median() if self._armed == "slow_step" else None
        self._slow_above = math.inf if median is None else \
            max(self._current["factor"] * median, median + MIN_EXCESS_S)

    def _poll(self, now: float) -> None:
        if self._armed and now > self._deadline:
            self._done([], f"no occurrence of {self._armed} within {self._current.get('expires_in')} s")
        elif self.root is not None and self._current is None and (order := self._claim()):
            self._start(order)

    # ------------------------------------------------------------------ requests

    def _claim(self) -> dict | None:
        for entry in sorted(os.scandir(self.requests), key=lambda e: e.name):
            if not entry.name.endswith(".json"):
                continue
            taken = self.taken / entry.name
            try:
                os.rename(entry.path, taken)  # atomic: of several processes, one claims it
            except FileNotFoundError:
                continue  # another process was first
            try:
                return json.loads(taken.read_text())
            except (OSError, ValueError) as e:
                log.warning("unreadable capture request %s: %s", entry.name, e)
        return None

    def _start(self, order: dict) -> None:
        out = self.results / str(order["id"])
        out.mkdir(parents=True, exist_ok=True)
        kind, trigger = order.get("kind"), order.get("trigger") or "now"
        self._current = {**order, "out": out, "factor": float(order.get("factor") or 1.5),
                         "max_bytes": int(order.get("max_bytes") or DEFAULT_MAX_BYTES)}
        try:
            if (kind, trigger) == (PROFILER, "now"):
                self._start_profiler(int(order.get("steps") or 20))
            elif (kind, trigger) == (PROFILER, "slow_step"):
                self._arm(trigger)
            elif (kind, trigger) == (FLIGHT_RECORDER, "now"):
                self._done([self._dump_flight_recorder(out)])
            elif (kind, trigger) == (FLIGHT_RECORDER, "stalled_step"):
                self._arm(trigger)
                self._watchdog = threading.Thread(target=self._watch_for_stall, name="tracedoc-stall-watch",
                                                  args=(float(order.get("stall_s") or 60.0),), daemon=True)
                self._watchdog.start()
            elif kind == MEMORY_SNAPSHOT and trigger in ("now", "oom"):
                self._start_memory(trigger)
            else:
                self._done([], f"this hook does not take {kind!r} captures on trigger {trigger!r}")
        except Exception as e:  # a capture must never take the program down
            self._profiler = None
            self._done([], f"{type(e).__name__}: {e}")

    def _arm(self, trigger: str) -> None:
        self._armed = trigger
        self._deadline = self.clock() + float(self._current.get("expires_in") or 3600)
        self._set_slow_threshold()
        log.info("capture request %s armed: waiting for %s", self._current["id"], trigger)

    # ------------------------------------------------------------------ profiler

    def _start_window(self) -> None:
        self._windows += 1
        self._window_times = []
        self._start_profiler(int(self._current.get("steps") or 20))

    def _start_profiler(self, steps: int) -> None:
        import torch  # only when a capture runs: until then the hook imports the standard library alone
        from torch.profiler import ProfilerActivity, profile  # with torch: only when a capture runs
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        self._profiler = profile(activities=activities)
        # ProfilerStep#N spans around each step (torch writes them only with a schedule): the
        # server reads a window's steps from them (rules.engine.features.slow_steps)
        self._profiler.record_steps = True
        self._profiler.start()
        self._steps_left = steps

    def _profiling_step(self, took: float) -> None:
        self._window_times.append(took)
        try:
            self._profiler.step()
        except Exception as e:
            self._profiler = None
            self._done([], f"{type(e).__name__}: {e}")
            return
        self._steps_left -= 1
        if self._steps_left > 0:
            return
        if self._armed == "slow_step" and not self._holds_slow_step():
            self._drop_window()
            return
        self._finish_profiler()

    def _holds_slow_step(self) -> bool:
        """Judged against the window's own median: the profiler slows every step alike."""
        times = sorted(self._window_times)
        return bool(times) and times[-1] > self._current["factor"] * times[len(times) // 2] \
            and times[-1] - times[len(times) // 2] >= MIN_EXCESS_S

    def _drop_window(self) -> None:
        profiler, self._profiler = self._profiler, None
        try:
            profiler.stop()
        except Exception:
            pass
        if self._windows >= MAX_WINDOWS:
            self._done([], f"{MAX_WINDOWS} profiler windows held no step over {self._current['factor']}x "
                           "their median: the slow steps did not come back")
        # else stay armed: the next slow step opens another window

    def _finish_profiler(self) -> None:
        profiler, self._profiler = self._profiler, None
        try:
            profiler.stop()
            path = self._current["out"] / f"profiler_trace_{_rank()}_{os.getpid()}.json"
            profiler.export_chrome_trace(str(path))
            self._done([_gzipped(path)])
        except Exception as e:
            self._done([], f"{type(e).__name__}: {e}")

    # ------------------------------------------------------------------ flight recorder

    def _watch_for_stall(self, stall_s: float) -> None:
        """Runs in its own thread: the loop it watches may be stuck inside a collective."""
        while True:
            time.sleep(min(1.0, stall_s / 4))
            with self._lock:
                if self._armed != "stalled_step":
                    return
                now = self.clock()
                if now > self._deadline:
                    self._finish_locked([], f"no stall of {stall_s:g} s within {self._current.get('expires_in')} s")
                    return
                if now - self._last_step > stall_s:
                    try:
                        self._finish_locked([self._dump_flight_recorder(self._current["out"])])
                    except Exception as e:
                        self._finish_locked([], f"{type(e).__name__}: {e}")
                    return

    @staticmethod
    def _dump_flight_recorder(out: Path) -> str:
        import torch.distributed as dist  # noqa: F401  (loads the c10d bindings; torch only when a capture runs)
        from torch._C import _distributed_c10d as c10d  # with torch: only when a capture runs
        dump = getattr(c10d, "_dump_nccl_trace", None)
        if dump is None:
            raise RuntimeError("this PyTorch has no NCCL flight recorder (built without NCCL?)")
        name = f"nccl_trace_rank_{_rank()}"
        (out / name).write_bytes(dump())
        return name

    # ------------------------------------------------------------------ memory snapshot

    def _start_memory(self, trigger: str) -> None:
        import torch  # only when a capture runs
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device in this process: a memory snapshot needs one")
        if trigger == "now":
            self._done([self._snapshot()])
            return
        torch.cuda.memory._record_memory_history(max_entries=HISTORY_ENTRIES)
        if not self._oom_hooked:  # observers cannot be removed: one per process, it checks the state
            torch._C._cuda_attach_out_of_memory_observer(self._on_oom)
            self._oom_hooked = True
        self._arm(trigger)

    def _on_oom(self, device, alloc, device_alloc, device_free) -> None:
        with self._lock:
            if self._armed != "oom":
                return
            try:
                self._finish_locked([self._snapshot()])
            except Exception as e:
                self._finish_locked([], f"{type(e).__name__}: {e}")

    def _snapshot(self) -> str:
        import pickle  # writing the snapshot's own format; tracedoc reads it with a bounded unpickler

        import torch
        name = f"memory_snapshot_rank_{_rank()}.pickle"
        with open(self._current["out"] / name, "wb") as f:
            pickle.dump(torch.cuda.memory._snapshot(), f)
        if self._armed == "oom":
            torch.cuda.memory._record_memory_history(enabled=None)
        return name

    # ------------------------------------------------------------------ results

    def _done(self, files: list[str], error: str = "") -> None:
        with self._lock:
            self._finish_locked(files, error)

    def _finish_locked(self, files: list[str], error: str = "") -> None:
        order, self._current, self._armed = self._current, None, ""
        self._slow_above = math.inf
        self._windows = 0
        if order is None:
            return
        size = sum((order["out"] / f).stat().st_size for f in files if (order["out"] / f).is_file())
        if size > order["max_bytes"]:
            shutil.rmtree(order["out"], ignore_errors=True)
            order["out"].mkdir(parents=True, exist_ok=True)
            files, error = [], f"the capture holds {size:,} bytes, over the order's bound of {order['max_bytes']:,}"
        write_json(self.results / f"{order['id']}.done.json", {"id": order["id"], "files": files, "error": error})


def _gzipped(path: Path) -> str:
    with open(path, "rb") as src, gzip.open(f"{path}.gz", "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    path.unlink()
    return f"{path.name}.gz"


def _rank() -> str:
    return os.environ.get("RANK", "0")
