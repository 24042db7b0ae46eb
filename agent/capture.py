"""One capture: the sampler, log tailer and dump watcher writing into the spool, and the
labels that go with each bundle. `tracedoc-agent run` collects on a timer and bundles per
window; `wrap` collects once when its command exits."""
from __future__ import annotations

import datetime as dt
import socket
from dataclasses import dataclass

from agent import __version__
from agent.dumps import DumpWatcher
from agent.nvml_sampler import Sampler
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

    def bundle(self, labels: dict[str, str], start: float, end: float, name: str = "") -> Bundle | None:
        window = {"window_start": iso(start), "window_end": iso(end)}
        name = name or f"{labels.get('host', '')} {window['window_start']}"
        return self.spool.make_bundle({**labels, **window}, name)

    def finish(self, labels: dict[str, str], start: float, end: float, name: str = "") -> Bundle | None:
        """Stop capturing, spool everything left (unfinished lines, dumps still being watched)
        and bundle it."""
        if self.sampler:
            self.sampler.stop()
        self.collect(final=True)
        if self.tailer:
            self.tailer.close()
        return self.bundle(labels, start, end, name)
