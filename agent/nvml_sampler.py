"""NVML sampling into JSON lines, the format `ingest/engine/parsers/nvml/jsonl.py` reads.

One line per device per sample:
  {"ts_ns": ..., "host": ..., "gpu": 0, "util_gpu": 37, "util_mem": 12, "mem_used": ..., "mem_free": ...,
   "mem_total": ..., "power_mw": ..., "temp_c": ..., "sm_clock_mhz": ..., "mem_clock_mhz": ...,
   "throttle_reasons": <nvmlClocksEventReason bitmask>, "xid": <only when one happened>}
and, once a second (the "slow" fields):
   "gpu_uncorrected_ecc": ..., "procs": [{"pid": ..., "used": bytes}],
   "pcie_tx_kbs": ..., "pcie_rx_kbs": ... (only with pcie=True)

What each read costs decides when it is made (median per call on an H200, driver 580;
`bench/agent_overhead.py` measures them on any host, docs/agent.md has the table): the
every-sample getters take 1-6 us each; the running-processes list 7-24 us, so it is read
once a second, with the ECC count. `nvmlDeviceGetPcieThroughput` samples the bus for 20 ms
inside the driver (21 ms a call), 42 ms of driver time a second per GPU at the old cadence,
for a figure no rule reads: PCIe traffic is off by default. With pcie=True it comes from the
cumulative byte counters (in the same batched `nvmlDeviceGetFieldValues` call as the ECC
count, 0.3 ms), and from the 20 ms query, at most every PCIE_QUERY_EVERY_S, only where the
driver has no counters.

The sampler takes its device reader as a parameter: `NvmlReader` talks to the driver (through
the `nvml` module it is given, pynvml by default), tests pass an object with the same three
methods (devices, read, xid_events) or a fake pynvml.
"""
from __future__ import annotations

import ctypes
import json
import logging
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Protocol

log = logging.getLogger(__name__)

MAX_BUFFERED_LINES = 200_000  # about 20 min of 8 GPUs at 10 Hz between drains; older lines are dropped
SLOW_EVERY_S = 1.0            # running processes, ECC count and PCIe counters: once a second
PCIE_QUERY_EVERY_S = 10.0     # the blocking PCIe throughput query, where the driver has no counters

# nvmlFieldValue ids (nvml.h); literal so that an older pynvml without the names still works
FI_ECC_DBE_VOL_TOTAL = 4      # uncorrected (double-bit) volatile ECC errors
FI_PCIE_COUNT_TX_BYTES = 197  # cumulative PCIe bytes, Hopper and later drivers
FI_PCIE_COUNT_RX_BYTES = 198
NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED = 0, 3
_VALUE_MEMBER = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used on this host (no driver, no GPU, no library): the message says which."""


class DeviceReader(Protocol):
    def devices(self) -> list[int]: ...
    def read(self, index: int, slow: bool) -> dict: ...
    def xid_events(self) -> list[tuple[int, int]]: ...


@dataclass
class _Counter:
    """The last reading of a cumulative byte counter, to turn the next one into a rate."""
    value: int
    at_us: int


class NvmlReader:
    """Reads the sample fields of each GPU. A field the device does not support is left out of
    the record; a device that cannot be read at all yields {"error": ...}."""

    def __init__(self, pcie: bool = False, nvml=None, clock: Callable[[], float] = time.monotonic):
        if nvml is None:
            try:
                import pynvml as nvml  # optional (nvidia-ml-py): hosts without it capture logs and dumps
            except ImportError:
                raise NvmlUnavailable("the pynvml module is not installed (pip install nvidia-ml-py)") from None
        self.nvml, self.pcie, self.clock = nvml, pcie, clock
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as e:
            raise NvmlUnavailable(f"NVML could not start ({e}): no NVIDIA driver or GPU on this host?") from None
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        self.index_of = {self._key(h): i for i, h in enumerate(self.handles)}
        self.events = self._register_xid_events()
        self.reported: set[tuple[int, str]] = set()
        self.slow_fields = [FI_ECC_DBE_VOL_TOTAL] + ([FI_PCIE_COUNT_TX_BYTES, FI_PCIE_COUNT_RX_BYTES] if pcie else [])
        self.fields_broken: set[int] = set()                  # devices where the batched read fails
        self.ecc_fallback: set[int] = set()                   # devices whose ECC field failed
        self.pcie_query: set[int] = set()                     # devices without PCIe counters
        self.counters: dict[tuple[int, int], _Counter] = {}   # (device, field id) -> last reading
        self.last_pcie_query: dict[int, float] = {}

    @staticmethod
    def _key(handle) -> int:
        try:
            return ctypes.cast(handle, ctypes.c_void_p).value or 0
        except (TypeError, ctypes.ArgumentError):
            return id(handle)  # not a ctypes pointer (a test's fake handle)

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

    def read(self, index: int, slow: bool) -> dict:
        nv, h = self.nvml, self.handles[index]
        rec: dict = {}
        errors: list[str] = []

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
        if slow:
            self._read_slow_fields(index, rec, errors, field)
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

    def _read_slow_fields(self, index: int, rec: dict, errors: list[str], field) -> None:
        """ECC count and PCIe byte counters in one batched call; each falls back to its own
        getter where the batch or its field fails on this device."""
        nv, h = self.nvml, self.handles[index]
        values = self._field_values(index, errors)
        if values.get(FI_ECC_DBE_VOL_TOTAL) is None:
            self.ecc_fallback.add(index)
        if index in self.ecc_fallback:
            field(lambda: nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                         nv.NVML_VOLATILE_ECC), ("gpu_uncorrected_ecc", _same))
        else:
            rec["gpu_uncorrected_ecc"] = values[FI_ECC_DBE_VOL_TOTAL][0]
        if not self.pcie:
            return
        if values.get(FI_PCIE_COUNT_TX_BYTES) is None or values.get(FI_PCIE_COUNT_RX_BYTES) is None:
            if index not in self.pcie_query:
                self.pcie_query.add(index)
                log.warning("GPU %d: no PCIe byte counters; PCIe throughput is queried every %.0f s instead "
                            "(each query blocks the driver about 20 ms)", index, PCIE_QUERY_EVERY_S)
        if index not in self.pcie_query:
            for key, fid in (("pcie_tx_kbs", FI_PCIE_COUNT_TX_BYTES), ("pcie_rx_kbs", FI_PCIE_COUNT_RX_BYTES)):
                if (rate := self._rate(index, fid, *values[fid])) is not None:
                    rec[key] = rate
            return
        now = self.clock()
        if now - self.last_pcie_query.get(index, float("-inf")) >= PCIE_QUERY_EVERY_S:
            self.last_pcie_query[index] = now
            field(lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES), ("pcie_tx_kbs", _same))
            field(lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES), ("pcie_rx_kbs", _same))

    def _field_values(self, index: int, errors: list[str]) -> dict[int, tuple[int, int] | None]:
        """{field id: (value, timestamp in us)} for the slow fields; None where the field failed."""
        if index in self.fields_broken:
            return {}
        nv = self.nvml
        try:
            raw = nv.nvmlDeviceGetFieldValues(self.handles[index], self.slow_fields)
        except (nv.NVMLError, AttributeError) as e:  # AttributeError: a pynvml without the call
            self.fields_broken.add(index)
            log.info("GPU %d: batched field reads unavailable (%s); one call per field", index, e)
            return {}
        out: dict[int, tuple[int, int] | None] = {}
        for v in raw:
            member = _VALUE_MEMBER.get(int(v.valueType))
            if int(v.nvmlReturn) != NVML_SUCCESS or member is None:
                out[int(v.fieldId)] = None
                continue
            out[int(v.fieldId)] = (int(getattr(v.value, member)), int(v.timestamp))
        return out

    def _rate(self, index: int, fid: int, value: int, at_us: int) -> int | None:
        """KB/s since the last reading of a cumulative counter; None on the first or after a reset."""
        at_us = at_us or int(self.clock() * 1e6)
        last = self.counters.get((index, fid))
        self.counters[(index, fid)] = _Counter(value, at_us)
        if last is None or value < last.value or at_us <= last.at_us:
            return None
        return int((value - last.value) * 1e6 / (at_us - last.at_us) / 1024)

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
    """Samples every device into a bounded in-memory buffer of JSON lines; the agent drains it
    into the spool. `tracedoc-agent run` calls sample() from its one loop; `wrap` and `sample`
    run it in its own thread (start/stop). The slow fields are read at most every `slow_every`."""

    def __init__(self, reader: DeviceReader, interval: float = 0.1, host: str | None = None,
                 clock=time.time_ns, max_lines: int = MAX_BUFFERED_LINES, slow_every: float = SLOW_EVERY_S):
        self.reader, self.interval, self.clock, self.slow_every = reader, interval, clock, slow_every
        self.host = host or socket.gethostname()
        self._lines: deque[bytes] = deque(maxlen=max_lines)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_slow = float("-inf")
        self._last_error = ""
        self.samples = self.dropped = 0

    def sample_once(self) -> int:
        """Read every device once and buffer one line each; returns the number of lines."""
        now = time.monotonic()
        slow = now - self._last_slow >= self.slow_every
        if slow:
            self._last_slow = now
        xids: dict[int, int] = {}
        for gpu, xid in self.reader.xid_events():
            xids[gpu] = xid  # the parser reads one Xid per line; the latest wins, all are logged
            log.error("GPU %d: Xid %d", gpu, xid)
        lines = []
        for index in self.reader.devices():
            rec = {"ts_ns": self.clock(), "host": self.host, "gpu": index}
            rec.update(self.reader.read(index, slow))
            if index in xids:
                rec["xid"] = xids[index]
            lines.append(json.dumps(rec, separators=(", ", ": ")).encode() + b"\n")
        with self._lock:
            room = self._lines.maxlen - len(self._lines)
            self.dropped += max(0, len(lines) - room)
            self._lines.extend(lines)
        self.samples += 1
        return len(lines)

    def sample(self) -> None:
        """sample_once, for a loop: one bad read must not end sampling, and a lasting failure
        (GPU gone) is logged once, not at every sample."""
        try:
            self.sample_once()
            self._last_error = ""
        except Exception as e:
            if str(e) != self._last_error:
                log.warning("NVML sample failed: %s", e)
            self._last_error = str(e)

    def drain(self) -> bytes:
        """The buffered lines, removed from the buffer."""
        with self._lock:
            data = b"".join(self._lines)
            self._lines.clear()
        return data

    def _run(self, setup: Callable[[], object] | None) -> None:
        if setup:
            setup()  # e.g. lower this thread's priority, not the wrapped command's
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.sample()
            next_at = next_tick(next_at, self.interval, time.monotonic())
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def start(self, setup: Callable[[], object] | None = None) -> "Sampler":
        """Sample in a thread of its own; `setup` runs first in that thread."""
        self._thread = threading.Thread(target=self._run, args=(setup,), name="nvml-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling and release the reader (the buffer stays, to be drained)."""
        self._stop.set()
        if self._thread:
            self._thread.join()
        if close := getattr(self.reader, "close", None):
            close()


def next_tick(scheduled: float, interval: float, now: float) -> float:
    """The first time on the `interval` grid of `scheduled` that is after `now`: when late (a
    slow read, a busy host), the missed ticks are skipped, not caught up in a burst."""
    following = scheduled + interval
    if following <= now:
        following += ((now - following) // interval + 1) * interval
    return following


def open_sampler(interval: float, host: str | None = None, pcie: bool = False,
                 start: bool = True, setup: Callable[[], object] | None = None) -> Sampler | None:
    """A sampler on the real NVML (started in its own thread unless start=False), or None with a
    clear warning when NVML is unusable."""
    try:
        reader = NvmlReader(pcie=pcie)
    except NvmlUnavailable as e:
        log.warning("NVML unavailable, no GPU samples will be captured: %s", e)
        return None
    log.info("sampling %d GPU(s) every %.3g s%s", len(reader.devices()), interval,
             ", PCIe traffic included" if pcie else "")
    sampler = Sampler(reader, interval, host)
    return sampler.start(setup) if start else sampler


def gpu_inventory(nvml=None) -> list[dict]:
    """What the heartbeat says about the GPUs: index, name, UUID, memory, driver. Read once,
    off the sampling thread, with its own NVML session; [] where NVML is unusable."""
    if nvml is None:
        try:
            import pynvml as nvml  # optional (nvidia-ml-py): no GPU inventory without it
        except ImportError:
            return []
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return []
    gpus = []
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            gpus.append({"index": i, "name": _text(nvml.nvmlDeviceGetName(h)), "uuid": _text(nvml.nvmlDeviceGetUUID(h)),
                         "memory_total": int(nvml.nvmlDeviceGetMemoryInfo(h).total), "driver": driver})
    except nvml.NVMLError as e:
        log.warning("GPU inventory incomplete: %s", e)
    finally:
        nvml.nvmlShutdown()
    return gpus


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
