"""NvmlReader against a fake pynvml that counts its calls: which driver calls each sample
makes, and how often the expensive ones happen (the agent's overhead on a GPU host)."""
import itertools
import logging
from collections import Counter
from types import SimpleNamespace

import pytest

from agent.nvml_sampler import (
    FI_ECC_DBE_VOL_TOTAL, FI_PCIE_COUNT_RX_BYTES, FI_PCIE_COUNT_TX_BYTES, NvmlReader, Sampler, next_tick,
)
from tests.support.nvml_sampler import parse_events


class FakeNvml:
    """The pynvml calls the reader makes, on `gpus` devices. `counters`: the driver has the
    cumulative PCIe byte counters; `batched`: nvmlDeviceGetFieldValues works at all."""

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):
        pass

    class NVMLError_Timeout(NVMLError):
        pass

    NVML_TEMPERATURE_GPU, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC = 1, 0
    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1
    nvmlEventTypeXidCriticalError = 8

    def __init__(self, gpus=2, counters=True, batched=True):
        self.gpus, self.counters, self.batched = gpus, counters, batched
        self.calls: Counter[str] = Counter()
        self.field_ids: list[list[int]] = []
        self.ts_us = {i: itertools.count(1_000_000, 1_000_000) for i in range(gpus)}  # a second apart
        self.tx = {i: 0 for i in range(gpus)}

    def __getattr__(self, name):  # every nvml* call is counted, then answered by _name
        impl = object.__getattribute__(self, "_" + name)

        def call(*args):
            self.calls[name] += 1
            return impl(*args)
        return call

    def _nvmlInit(self): pass
    def _nvmlShutdown(self): pass
    def _nvmlDeviceGetCount(self): return self.gpus
    def _nvmlDeviceGetHandleByIndex(self, i): return 1000 + i
    def _nvmlEventSetCreate(self): return "events"
    def _nvmlDeviceRegisterEvents(self, h, kind, events): pass
    def _nvmlEventSetFree(self, events): pass
    def _nvmlEventSetWait_v2(self, events, timeout): raise self.NVMLError_Timeout()
    def _nvmlDeviceGetUtilizationRates(self, h): return SimpleNamespace(gpu=90, memory=40)
    def _nvmlDeviceGetMemoryInfo(self, h): return SimpleNamespace(used=3 << 30, free=77 << 30, total=80 << 30)
    def _nvmlDeviceGetPowerUsage(self, h): return 350_000
    def _nvmlDeviceGetTemperature(self, h, sensor): return 55
    def _nvmlDeviceGetClockInfo(self, h, clock): return 1980 if clock == self.NVML_CLOCK_SM else 3201
    def _nvmlDeviceGetCurrentClocksEventReasons(self, h): return 0
    def _nvmlDeviceGetTotalEccErrors(self, h, kind, counter): return 2
    def _nvmlDeviceGetPcieThroughput(self, h, counter): return 700 if counter else 500

    def _nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=4242, usedGpuMemory=1 << 30)]

    def _nvmlDeviceGetFieldValues(self, h, ids):
        if not self.batched:
            raise self.NVMLError("Function Not Found")
        self.field_ids.append(list(ids))
        gpu = h - 1000
        at = next(self.ts_us[gpu])
        self.tx[gpu] += 2 << 20  # 2 MiB a second out, 1 MiB in
        values = {FI_ECC_DBE_VOL_TOTAL: 1, FI_PCIE_COUNT_TX_BYTES: self.tx[gpu],
                  FI_PCIE_COUNT_RX_BYTES: self.tx[gpu] // 2}
        return [SimpleNamespace(fieldId=i, valueType=3, timestamp=at,
                                nvmlReturn=3 if (i != FI_ECC_DBE_VOL_TOTAL and not self.counters) else 0,
                                value=SimpleNamespace(ullVal=values[i])) for i in ids]


EVERY_SAMPLE = {"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetPowerUsage",
                "nvmlDeviceGetTemperature", "nvmlDeviceGetClockInfo", "nvmlDeviceGetCurrentClocksEventReasons"}


def test_by_default_no_pcie_query_and_processes_and_ecc_once_a_second(tmp_path):
    nv = FakeNvml()
    sampler = Sampler(NvmlReader(nvml=nv), host="h")
    nv.calls.clear()
    for _ in range(10):  # back to back: within one second
        sampler.sample_once()

    assert nv.calls["nvmlDeviceGetPcieThroughput"] == 0
    assert nv.calls["nvmlDeviceGetComputeRunningProcesses"] == 2           # once per GPU, first sample only
    assert nv.calls["nvmlDeviceGetFieldValues"] == 2                       # ECC: one batched call per GPU
    assert nv.field_ids == [[FI_ECC_DBE_VOL_TOTAL]] * 2
    assert nv.calls["nvmlDeviceGetTotalEccErrors"] == 0
    assert nv.calls["nvmlEventSetWait_v2"] == 10                           # Xids: one poll per sample, all GPUs
    assert all(nv.calls[c] == 20 for c in EVERY_SAMPLE - {"nvmlDeviceGetClockInfo"})
    assert nv.calls["nvmlDeviceGetClockInfo"] == 40

    _, ev = parse_events(tmp_path, sampler.drain())
    assert len(ev[ev.name == "gpu.util"]) == 20
    procs = ev[ev.name == "proc.mem.used"]
    assert list(procs.pid) == [4242, 4242] and set(procs.device) == {0, 1}
    assert list(ev[ev.name == "ecc.uncorrected"].value) == [1.0, 1.0]
    assert ev[ev.name.str.startswith("pcie")].empty


def test_the_slow_fields_come_back_each_slow_interval():
    nv = FakeNvml(gpus=1)
    sampler = Sampler(NvmlReader(nvml=nv), host="h", slow_every=0.0)
    for _ in range(3):
        sampler.sample_once()
    assert nv.calls["nvmlDeviceGetComputeRunningProcesses"] == 3


def test_pcie_from_the_byte_counters_in_the_same_batched_call(tmp_path):
    nv = FakeNvml()
    sampler = Sampler(NvmlReader(pcie=True, nvml=nv), host="h", slow_every=0.0)
    for _ in range(3):
        sampler.sample_once()

    assert nv.calls["nvmlDeviceGetPcieThroughput"] == 0
    assert nv.calls["nvmlDeviceGetFieldValues"] == 6  # one per GPU per sample: ECC and both counters
    assert nv.field_ids[0] == [FI_ECC_DBE_VOL_TOTAL, FI_PCIE_COUNT_TX_BYTES, FI_PCIE_COUNT_RX_BYTES]
    _, ev = parse_events(tmp_path, sampler.drain())
    tx, rx = ev[ev.name == "pcie.tx"], ev[ev.name == "pcie.rx"]
    # the first reading of a counter gives no rate; then 2 MiB and 1 MiB per (field-timestamp) second
    assert sorted(tx.value) == [2048.0] * 4 and sorted(rx.value) == [1024.0] * 4


def test_without_counters_pcie_falls_back_to_the_query_every_ten_seconds(caplog):
    now = [100.0]
    nv = FakeNvml(gpus=1, counters=False)
    reader = NvmlReader(pcie=True, nvml=nv, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="agent.nvml_sampler"):
        seen = []
        for step in range(25):  # 25 s, slow fields each second
            now[0] = 100.0 + step
            seen.append("pcie_tx_kbs" in reader.read(0, slow=True))
    assert seen.count(True) == 3 and seen[0] and seen[10] and seen[20]
    assert nv.calls["nvmlDeviceGetPcieThroughput"] == 6
    assert sum("no PCIe byte counters" in r.message for r in caplog.records) == 1


def test_without_batched_reads_ecc_comes_from_its_own_call():
    nv = FakeNvml(gpus=1, batched=False)
    reader = NvmlReader(nvml=nv)
    assert reader.read(0, slow=True)["gpu_uncorrected_ecc"] == 2
    assert reader.read(0, slow=True)["gpu_uncorrected_ecc"] == 2
    assert nv.calls["nvmlDeviceGetFieldValues"] == 1  # tried once, then one call per field
    assert nv.calls["nvmlDeviceGetTotalEccErrors"] == 2


def test_fast_reads_leave_out_the_slow_fields():
    rec = NvmlReader(nvml=FakeNvml(gpus=1)).read(0, slow=False)
    assert {"util_gpu", "mem_used", "power_mw", "temp_c", "sm_clock_mhz", "throttle_reasons"} <= rec.keys()
    assert not {"procs", "gpu_uncorrected_ecc", "pcie_tx_kbs"} & rec.keys()


@pytest.mark.parametrize("scheduled, now, expected", [
    (10.0, 10.05, 10.1),   # on time: the next tick on the grid
    (10.0, 10.1, 10.2),    # exactly at the next tick: the one after (never a zero wait)
    (10.0, 10.35, 10.4),   # three ticks late: the missed ones are skipped, not made in a burst
])
def test_next_tick_keeps_the_grid_and_skips_missed_ticks(scheduled, now, expected):
    assert next_tick(scheduled, 0.1, now) == pytest.approx(expected)
