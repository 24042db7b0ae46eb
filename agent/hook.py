"""The program side of on-demand captures: a hook a training or serving loop calls once per
step, which runs the captures people ask for from the tracedoc server.

    from agent.hook import CaptureHook
    hook = CaptureHook()          # inert unless TRACEDOC_CAPTURE_DIR is set (`tracedoc-agent wrap` sets it)
    for batch in loader:
        step(batch)
        hook.step()

The agent writes each request as `requests/<id>.json` in the capture folder. The first process
whose hook sees it claims it (renames it into `taken/`, so one process of many takes it), runs
it, and writes what it captured into `results/<id>/` and then `results/<id>.done.json` (the
files, or why it failed); the agent ships the folder as a trace. Kinds:

  profiler         `torch.profiler` over the next `steps` calls of step(), CPU and (where there
                   is one) CUDA activity, exported as a Chrome trace
  flight_recorder  the NCCL flight recorder's entries, dumped now (the format of the dumps
                   written on a watchdog timeout)

Between requests step() costs one clock read; it looks for a request once per `poll_every` s.
Only the standard library is imported until a capture runs (then torch).
"""
from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)

ENV_VAR = "TRACEDOC_CAPTURE_DIR"
PROFILER, FLIGHT_RECORDER = "profiler", "flight_recorder"


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
        self._current: dict | None = None
        self._steps_left = 0

    def step(self) -> None:
        """Call once per step of the loop."""
        if self._profiler is not None:
            self._profiler.step()
            self._steps_left -= 1
            if self._steps_left <= 0:
                self._finish_profiler()
            return
        if self.root is None or self.clock() < self._next_poll:
            return
        self._next_poll = self.clock() + self.poll_every
        if order := self._claim():
            self._start(order)

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
        self._current = {**order, "out": out}
        try:
            if order.get("kind") == PROFILER:
                self._start_profiler(int(order.get("steps") or 20))
            elif order.get("kind") == FLIGHT_RECORDER:
                self._done([self._dump_flight_recorder(out)])
            else:
                self._done([], f"this hook does not know the capture kind {order.get('kind')!r}")
        except Exception as e:  # a capture must never take the program down
            self._profiler = None
            self._done([], f"{type(e).__name__}: {e}")

    def _start_profiler(self, steps: int) -> None:
        import torch  # only when a capture runs: until then the hook imports the standard library alone
        from torch.profiler import ProfilerActivity, profile  # with torch: only when a capture runs
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        self._profiler = profile(activities=activities)
        self._profiler.start()
        self._steps_left = steps

    def _finish_profiler(self) -> None:
        profiler, self._profiler = self._profiler, None
        try:
            profiler.stop()
            path = self._current["out"] / f"profiler_trace_{_rank()}_{os.getpid()}.json"
            profiler.export_chrome_trace(str(path))
            self._done([path.name])
        except Exception as e:
            self._done([], f"{type(e).__name__}: {e}")

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

    def _done(self, files: list[str], error: str = "") -> None:
        order, self._current = self._current, None
        write_json(self.results / f"{order['id']}.done.json", {"id": order["id"], "files": files, "error": error})


def _rank() -> str:
    return os.environ.get("RANK", "0")
