"""A fake NVML reader for the agent's sampler, and the sampler's JSON lines read back through
the server's own parser (ingest.engine.parse.parse_artifact)."""
import pyarrow.parquet as pq

from ingest.engine.parse import parse_artifact


class FakeReader:
    """Two GPUs whose readings follow the sample number; GPU 1 reports Xid 79 at the third
    sample and starts power capping (clock-event bit 0x4) from the fourth."""

    def __init__(self):
        self.n = {0: 0, 1: 0}
        self.pending_xid = []

    def devices(self):
        return [0, 1]

    def read(self, index, with_pcie):
        self.n[index] += 1
        n = self.n[index]
        if index == 1 and n == 3:
            self.pending_xid.append((1, 79))
        rec = {"util_gpu": 10 * n + index, "util_mem": n, "mem_used": (1 << 30) * n, "mem_free": 1 << 34,
               "mem_total": 80 << 30, "power_mw": 100_000 + 1000 * n, "temp_c": 40 + n,
               "sm_clock_mhz": 1980, "mem_clock_mhz": 3201,
               "throttle_reasons": 0x4 if (index == 1 and n >= 4) else 0,
               "procs": [{"pid": 4000 + index, "used": (1 << 29) * n}]}
        if with_pcie:
            rec.update(pcie_tx_kbs=500, pcie_rx_kbs=700)
        return rec

    def xid_events(self):
        found, self.pending_xid = self.pending_xid, []
        return found


def parse_events(tmp_path, jsonl: bytes, name="nvml_samples.jsonl"):
    src = tmp_path / name
    src.write_bytes(jsonl)
    report = parse_artifact(src, tmp_path / "events.parquet", "a1")
    return report, pq.read_table(tmp_path / "events.parquet").to_pandas()
