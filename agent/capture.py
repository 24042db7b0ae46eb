"""One capture: the sampler, log tailer and dump watcher writing into the spool, and the
labels that go with each bundle. `tracedoc-agent run` drives it with `run_loop` (sampling,
collecting and closing windows from one thread) and bundles each window on its shipping
thread; `wrap` collects on a timer while its command runs and once when it exits."""
from __future__ import annotations

import datetime as dt
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from agent import __version__
from agent.dumps import DumpWatcher
from agent.nvml_sampler import Sampler, next_tick
from agent.spool import Bundle, Spool
from agent.tailer import LogTailer

NVML_STREAM = "nvml_samples.jsonl"


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def base_labels(user: dict[str, str]) -> dict[str, str]:
    """What every bundle says about where it came from; the user's labels win on a clash."""
    return {"source": "tracedoc-agent", "host": socket.gethostname(), "agent_version": __version__, **user}


@dataclass
class Capture:
    spool: Spool
    sampler: Sampler | None = None
    tailer: LogTailer | None = None
    dumps: DumpWatcher | None = None

    def collect(self, final: bool = False) -> None:
        """Move what was captured since the last call into the spool."""
        if self.sampler:
            self.spool.add_chunk(NVML_STREAM, self.sampler.drain())
        if self.tailer:
            self.tailer.poll()
            if final:
                self.tailer.flush()
        if self.dumps:
            self.dumps.poll(final=final)

    def bundle(self, labels: dict[str, str], start: float, end: float, name: str = "",
               chunks: list[Path] | None = None) -> Bundle | None:
        """Bundle the window's chunks (`chunks`, listed when it closed; default: all pending)."""
        window = {"window_start": iso(start), "window_end": iso(end)}
        name = name or f"{labels.get('host', '')} {window['window_start']}"
        return self.spool.make_bundle({**labels, **window}, name, chunks)

    def finish(self, labels: dict[str, str], start: float, end: float, name: str = "") -> Bundle | None:
        """Stop capturing, spool everything left (unfinished lines, dumps still being watched)
        and bundle it."""
        if self.sampler:
            self.sampler.stop()
        self.collect(final=True)
        if self.tailer:
            self.tailer.close()
        return self.bundle(labels, start, end, name)


def run_loop(capture: Capture, stop: threading.Event, interval: float, collect_every: float,
             ship_every: float, on_window: Callable[[float, float, list[Path]], object],
             clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> float:
    """The agent's one timer: sample every `interval` (when there is a sampler), move what was
    captured into the spool every `collect_every`, and close a window every `ship_every` with
    on_window(start, end, its chunks), which only hands it on (bundling is slow: gzip). With a
    sampler the loop wakes once per interval and the rest rides on those ticks; without one
    (no NVML) it wakes only to collect. Returns when `stop` is set, with the start of the
    window still open."""
    sampler = capture.sampler
    capture.collect()  # log files are followed from their end as of now, not as of the first collection
    now = clock()
    next_sample, next_collect, next_ship = now, now + collect_every, now + ship_every
    window_start = wall()
    while True:
        now = clock()
        if sampler is not None and now >= next_sample:
            sampler.sample()
            next_sample = next_tick(next_sample, interval, clock())
        if now >= next_collect or now >= next_ship:
            capture.collect()
            next_collect = clock() + collect_every
        if now >= next_ship:
            end = wall()
            on_window(window_start, end, capture.spool.pending_chunks())
            window_start = end
            next_ship = next_tick(next_ship, ship_every, clock())
        # with a sampler, collecting and closing windows ride on its ticks: one wake-up per interval
        wake = next_sample if sampler is not None else min(next_collect, next_ship)
        if stop.wait(max(0.0, wake - clock())):
            return window_start
