"""The agent side of on-demand captures (see agent.hook for the program side): capture orders
from the heartbeat's answer become request files in the capture folder (an `nvml_burst` or an
`ebpf` window the agent takes itself, agent.nvml_burst and agent.ebpf_order); a finished result
folder becomes one bundle labelled with its request, shipped on its own; a request nobody
took or finished in time, or one that failed, is reported back in the next heartbeat."""
from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from agent.ebpf_order import DEFAULT_SETTINGS, EBPF, EbpfOrderSettings, start_ebpf_order
from agent.hook import folders, write_json
from agent.nvml_burst import NVML_BURST, start_burst
from agent.nvml_sampler import DeviceReader, NvmlReader
from agent.spool import Bundle, Spool

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 600.0


@dataclass
class _Outstanding:
    order: dict
    deadline: float


class OnDemand:
    """`deliver(job)` hands a bundling job to whoever ships (the shipping thread)."""

    def __init__(self, root: Path, spool: Spool, labels: dict[str, str],
                 deliver: Callable[[Callable[[], Bundle | None]], None], timeout: float = DEFAULT_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic, nvml: Callable[[], DeviceReader] = NvmlReader,
                 ebpf: EbpfOrderSettings = DEFAULT_SETTINGS):
        self.root, self.spool, self.labels, self.deliver = Path(root), spool, labels, deliver
        self.nvml, self.ebpf = nvml, ebpf
        self.requests, self.taken, self.results = folders(self.root)
        self.timeout, self.clock = timeout, clock
        self.outstanding: dict[int, _Outstanding] = {}
        self.failed: dict[str, str] = {}  # request id -> why, for the next heartbeat

    def take(self, orders: list[dict]) -> None:
        for order in orders:
            rid = int(order["id"])
            if rid in self.outstanding:
                continue
            self.outstanding[rid] = _Outstanding(order, self.clock() + self._patience(order))
            if order.get("kind") == NVML_BURST:  # the agent's own capture: no program hook involved
                start_burst(order, self.results, self.labels.get("host"), self.nvml)
                log.info("capture request %d: NVML at a high rate for %s s", rid, order.get("duration_s"))
                continue
            if order.get("kind") == EBPF:  # the agent's own too: a kernel-side window, no hook involved
                start_ebpf_order(order, self.results, self.labels.get("host"), self.ebpf)
                log.info("capture request %d: an eBPF window of %s s", rid, order.get("duration_s"))
                continue
            write_json(self.requests / f"{rid}.json", order)
            log.info("capture request %d (%s) waits for a process to take it in %s", rid, order.get("kind"),
                     self.root)

    def _patience(self, order: dict) -> float:
        """How long the agent waits for a result: an order that waits for an occurrence (the
        next slow step, stall or OOM) may wait until it expires, and then take its capture."""
        if order.get("kind") in (NVML_BURST, EBPF):
            return self.timeout + float(order.get("duration_s") or 0)
        if (order.get("trigger") or "now") == "now":
            return self.timeout
        return max(self.timeout, float(order.get("expires_in") or 0) + self.timeout)

    def poll(self) -> None:
        """Ship what finished; give up on what is late."""
        for rid, item in list(self.outstanding.items()):
            done = self.results / f"{rid}.done.json"
            if done.exists():
                self._finished(rid, item.order, done)
            elif self.clock() > item.deadline:
                self._give_up(rid)

    def _finished(self, rid: int, order: dict, done: Path) -> None:
        del self.outstanding[rid]
        outcome = json.loads(done.read_text())
        out = self.results / str(rid)
        files = {f"capture/{name}": out / name for name in outcome.get("files", []) if (out / name).is_file()}
        (self.taken / f"{rid}.json").unlink(missing_ok=True)
        if outcome.get("error") or not files:
            self.failed[str(rid)] = outcome.get("error") or "the process captured nothing"
            log.warning("capture request %d failed: %s", rid, self.failed[str(rid)])
            self._clean(rid)
            return
        labels = {**self.labels, "capture": "on-demand", "capture_kind": str(order.get("kind", "")),
                  "capture_request": str(rid)}
        name = f"{self.labels.get('host', '')}: {order.get('kind')} capture (request {rid})"

        def bundle() -> Bundle | None:
            try:
                return self.spool.bundle_files(files, labels, name)
            finally:
                self._clean(rid)

        self.deliver(bundle)
        log.info("capture request %d done: %d file(s) bundled to ship", rid, len(files))

    def _give_up(self, rid: int) -> None:
        del self.outstanding[rid]
        waiting = self.requests / f"{rid}.json"
        if waiting.exists():
            waiting.unlink(missing_ok=True)
            why = (f"no process took it within {self.timeout:.0f} s: is a program running with "
                   f"TRACEDOC_CAPTURE_DIR={self.root} that calls agent.hook.CaptureHook.step()?")
        else:
            why = f"a process took it but wrote no result within {self.timeout:.0f} s"
        self.failed[str(rid)] = why
        log.warning("capture request %d failed: %s", rid, why)
        self._clean(rid)

    def _clean(self, rid: int) -> None:
        (self.taken / f"{rid}.json").unlink(missing_ok=True)
        (self.results / f"{rid}.done.json").unlink(missing_ok=True)
        shutil.rmtree(self.results / str(rid), ignore_errors=True)

    def reported(self, ids) -> None:
        """The server has heard of these failures."""
        for rid in ids:
            self.failed.pop(rid, None)
