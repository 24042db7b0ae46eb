"""NVML sampling into JSON lines, the format `ingest/parsers/nvml_jsonl.py` reads.

One line per device per sample:
  {"ts_ns": ..., "host": ..., "gpu": 0, "util_gpu": 37, "util_mem": 12, "mem_used": ..., "mem_free": ...,
   "mem_total": ..., "power_mw": ..., "temp_c": ..., "sm_clock_mhz": ..., "mem_clock_mhz": ...,
   "throttle_reasons": <nvmlClocksEventReason bitmask>, "pcie_tx_kbs": ..., "pcie_rx_kbs": ...,
   "gpu_uncorrected_ecc": ..., "procs": [{"pid": ..., "used": bytes}], "xid": <only when one happened>}

The sampler takes its device reader as a parameter: `NvmlReader` talks to the driver, tests
pass an object with the same three methods (devices, read, xid_events).
"""
from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections import deque
from typing import Protocol

log = logging.getLogger(__name__)

MAX_BUFFERED_LINES = 200_000  # about 20 min of 8 GPUs at 10 Hz between drains; older lines are dropped
PCIE_EVERY_S = 1.0            # each PCIe throughput query blocks ~20 ms in the driver: not every sample


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used on this host (no driver, no GPU, no library): the message says which."""


class DeviceReader(Protocol):
    def devices(self) -> list[int]: ...
    def read(self, index: int, with_pcie: bool) -> dict: ...
    def xid_events(self) -> list[tuple[int, int]]: ...


class NvmlReader:
    """Reads the sample fields of each GPU through pynvml. A field the device does not
    support is left out of the record; a device that cannot be read at all yields {"error": ...}."""

    def __init__(self):
        try:
            import pynvml
        except ImportError:
            raise NvmlUnavailable("the pynvml module is not installed (pip install nvidia-ml-py)") from None
        self.nvml = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as e:
            raise NvmlUnavailable(f"NVML could not start ({e}): no NVIDIA driver or GPU on this host?") from None
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        self.index_of = {self._key(h): i for i, h in enumerate(self.handles)}
        self.events = self._register_xid_events()
        self.reported: set[tuple[int, str]] = set()

    @staticmethod
    def _key(handle) -> int:
        import ctypes
        return ctypes.cast(handle, ctypes.c_void_p).value or 0

    def _register_xid_events(self):
        nv = self.nvml
        try:
            events = nv.nvmlEventSetCreate()
        except nv.NVMLError as e:
            log.warning("Xid events not available (%s); Xids will only be seen in kernel logs", e)
            return None
        registered = 0
        for i, h in enumerate(self.handles):
            try:
                nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, events)
                registered += 1
            except nv.NVMLError as e:
                log.warning("GPU %d: Xid events not available (%s)", i, e)
        if not registered:
            nv.nvmlEventSetFree(events)
            return None
        return events

    def devices(self) -> list[int]:
        return list(range(len(self.handles)))

    def read(self, index: int, with_pcie: bool) -> dict:
        nv, h = self.nvml, self.handles[index]
        rec: dict = {}
        errors = []

        def field(fn, *keys_and_getters):
            try:
                value = fn()
            except nv.NVMLError as e:
                if not isinstance(e, nv.NVMLError_NotSupported):
                    errors.append(f"{'/'.join(k for k, _ in keys_and_getters)}: {e}")
                return
            for key, get in keys_and_getters:
                rec[key] = get(value)

        field(lambda: nv.nvmlDeviceGetUtilizationRates(h), ("util_gpu", lambda u: u.gpu),
              ("util_mem", lambda u: u.memory))
        field(lambda: nv.nvmlDeviceGetMemoryInfo(h), ("mem_used", lambda m: m.used), ("mem_free", lambda m: m.free),
              ("mem_total", lambda m: m.total))
        field(lambda: nv.nvmlDeviceGetPowerUsage(h), ("power_mw", _same))
        field(lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU), ("temp_c", _same))
        field(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM), ("sm_clock_mhz", _same))
        field(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM), ("mem_clock_mhz", _same))
        field(lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(h), ("throttle_reasons", _same))
        if with_pcie:
            field(lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES), ("pcie_tx_kbs", _same))
            field(lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES), ("pcie_rx_kbs", _same))
        field(lambda: nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC),
              ("gpu_uncorrected_ecc", _same))
        field(lambda: nv.nvmlDeviceGetComputeRunningProcesses(h),
              ("procs", lambda ps: [{"pid": p.pid, "used": p.usedGpuMemory} for p in ps
                                    if isinstance(p.usedGpuMemory, int)]))
        if errors and not rec:
            return {"error": "; ".join(errors)}
        for text in errors:
            if (index, text) not in self.reported:  # a field that keeps failing is logged once
                self.reported.add((index, text))
                log.warning("GPU %d: %s", index, text)
        return rec

    def xid_events(self) -> list[tuple[int, int]]:
        """Xid errors that happened since the last call, without waiting: [(gpu index, xid)]."""
        if self.events is None:
            return []
        nv, found = self.nvml, []
        while True:
            try:
                data = nv.nvmlEventSetWait_v2(self.events, 0)
            except nv.NVMLError_Timeout:
                return found
            except nv.NVMLError as e:
                log.warning("Xid event wait failed (%s); Xid events off from now on", e)
                self.events = None
                return found
            found.append((self.index_of.get(self._key(data.device), -1), int(data.eventData)))

    def close(self) -> None:
        if self.events is not None:
            self.nvml.nvmlEventSetFree(self.events)
        self.nvml.nvmlShutdown()


def _same(value):
    return value


class Sampler:
    """Samples every device each `interval` seconds into a bounded in-memory buffer of JSON
    lines; the agent drains it into the spool. Runs in its own thread (start/stop) or by
    calling sample_once()."""

    def __init__(self, reader: DeviceReader, interval: float = 0.1, host: str | None = None,
                 clock=time.time_ns, max_lines: int = MAX_BUFFERED_LINES):
        self.reader, self.interval, self.clock = reader, interval, clock
        self.host = host or socket.gethostname()
        self._lines: deque[bytes] = deque(maxlen=max_lines)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_pcie = float("-inf")
        self.samples = self.dropped = 0

    def sample_once(self) -> int:
        """Read every device once and buffer one line each; returns the number of lines."""
        now = time.monotonic()
        with_pcie = now - self._last_pcie >= PCIE_EVERY_S
        if with_pcie:
            self._last_pcie = now
        xids: dict[int, int] = {}
        for gpu, xid in self.reader.xid_events():
            xids[gpu] = xid  # the parser reads one Xid per line; the latest wins, all are logged
            log.error("GPU %d: Xid %d", gpu, xid)
        lines = []
        for index in self.reader.devices():
            rec = {"ts_ns": self.clock(), "host": self.host, "gpu": index}
            rec.update(self.reader.read(index, with_pcie))
            if index in xids:
                rec["xid"] = xids[index]
            lines.append(json.dumps(rec, separators=(", ", ": ")).encode() + b"\n")
        with self._lock:
            room = self._lines.maxlen - len(self._lines)
            self.dropped += max(0, len(lines) - room)
            self._lines.extend(lines)
        self.samples += 1
        return len(lines)

    def drain(self) -> bytes:
        """The buffered lines, removed from the buffer."""
        with self._lock:
            data = b"".join(self._lines)
            self._lines.clear()
        return data

    def _run(self) -> None:
        next_at, last_error = time.monotonic(), ""
        while not self._stop.is_set():
            try:
                self.sample_once()
                last_error = ""
            except Exception as e:  # one bad read must not end sampling for the whole run
                if str(e) != last_error:  # a lasting failure (GPU gone) is logged once, not 10 times a second
                    log.warning("NVML sample failed: %s", e)
                last_error = str(e)
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay < 0:  # slower than the interval: keep going, don't try to catch up
                next_at, delay = time.monotonic(), 0
            self._stop.wait(delay)

    def start(self) -> "Sampler":
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling and release the reader (the buffer stays, to be drained)."""
        self._stop.set()
        if self._thread:
            self._thread.join()
        if close := getattr(self.reader, "close", None):
            close()


def open_sampler(interval: float, host: str | None = None) -> Sampler | None:
    """A started sampler on the real NVML, or None with a clear warning when NVML is unusable."""
    try:
        reader = NvmlReader()
    except NvmlUnavailable as e:
        log.warning("NVML unavailable, no GPU samples will be captured: %s", e)
        return None
    log.info("sampling %d GPU(s) every %.3g s", len(reader.devices()), interval)
    return Sampler(reader, interval, host).start()
