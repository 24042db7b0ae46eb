"""The heartbeat: once per interval, on a thread of its own (never the sampling one), tell the
server this agent is alive (host, version, GPUs, last bundle, spool backlog) and take the
capture requests its answer holds. While a capture is outstanding it looks at the capture
folder once a second, so a result ships without waiting for the next heartbeat."""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from agent import __version__
from agent.on_demand import OnDemand
from agent.spool import Spool
from agent.uploader import ApiClient, ApiError, Shipper

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 30.0
CAPTURE_POLL_S = 1.0


class Heartbeat:
    def __init__(self, client: ApiClient, host: str, spool: Spool, shipper: Shipper | None = None,
                 interval: float = DEFAULT_INTERVAL_S, on_demand: OnDemand | None = None,
                 gpus: Callable[[], list[dict]] = list, setup: Callable[[], object] | None = None):
        self.client, self.host, self.spool, self.shipper = client, host, spool, shipper
        self.interval, self.on_demand, self.gpus, self.setup = interval, on_demand, gpus, setup
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._inventory: list[dict] = []
        self._last_error = ""
        self.beats = 0  # answered heartbeats

    def payload(self) -> dict:
        last = self.shipper.shipped[-1] if self.shipper and self.shipper.shipped else {}
        return {"host": self.host, "agent_version": __version__, "interval": self.interval,
                "gpus": self._inventory, "last_trace": last.get("id"),
                "pending_bundles": len(self.spool.bundles()),
                "failed_captures": dict(self.on_demand.failed) if self.on_demand else {}}

    def beat(self) -> bool:
        """One heartbeat; False when the server could not be told (it is retried next interval)."""
        beat = self.payload()
        try:
            answer = self.client.heartbeat(beat)
        except ApiError as e:
            if str(e) != self._last_error:  # an outage is logged once, not every interval
                log.warning("heartbeat failed: %s", e)
            self._last_error = str(e)
            return False
        self._last_error = ""
        self.beats += 1
        orders = answer.get("captures") or []
        if self.on_demand:
            self.on_demand.reported(beat["failed_captures"])
            self.on_demand.take(orders)
        elif orders:
            log.warning("the server asked for %d capture(s), but this agent has no capture folder", len(orders))
        return True

    def run(self) -> None:
        if self.setup:
            self.setup()  # e.g. the agent's priority and CPU, for this thread only
        self._inventory = self.gpus()
        while not self._stop.is_set():
            self.beat()
            next_beat = time.monotonic() + self.interval
            while not self._stop.is_set() and (left := next_beat - time.monotonic()) > 0:
                # a capture in flight: look for its result every second; otherwise sleep the interval
                busy = self.on_demand is not None and bool(self.on_demand.outstanding)
                self._stop.wait(min(left, CAPTURE_POLL_S) if busy else left)
                if self.on_demand:
                    self.on_demand.poll()
                    if self.on_demand.failed:
                        break  # tell the server now

    def start(self) -> "Heartbeat":
        self._thread = threading.Thread(target=self.run, name="heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
