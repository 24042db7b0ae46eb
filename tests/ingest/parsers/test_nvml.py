import csv
import json
import re

from ingest.engine.parsers.telemetry import decode_clock_event_reasons
from tests.corpus import corpus

NVML_METRICS = ("util_gpu", "util_mem", "mem_used", "mem_free", "mem_total", "power_mw", "temp_c",
                "sm_clock_mhz", "mem_clock_mhz", "pcie_tx_kbs", "pcie_rx_kbs")


def test_nvml_jsonl_samples_throttle_and_procs(parse):
    path = corpus("h200", "nvml", "nvml_samples.jsonl")
    records = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
    result, df = parse(path)
    assert result.format == "nvml_jsonl" and not result.error
    samples = df[df.kind == "sample"]
    assert (samples.name == "gpu.util").sum() == len(records)
    assert (samples.name == "proc.mem.used").sum() == sum(len(r["procs"]) for r in records)
    # power in W from mW, mem in bytes, on the sampler's own ns timestamps
    first = samples[samples.ts == records[0]["ts_ns"]].set_index("name")
    assert first.loc["power", "value"] == records[0]["power_mw"] / 1000
    assert first.loc["mem.used", "value"] == records[0]["mem_used"]
    # one marker per change of the throttle set, named from NVML's bits
    masks = [r["throttle_reasons"] for r in records]
    changes = 1 + sum(a != b for a, b in zip(masks, masks[1:]))
    markers = df[df.name == "ThrottleReason"]
    assert len(markers) == changes
    assert json.loads(markers.iloc[0]["attrs"])["reasons"] == (["GpuIdle"] if masks[0] == 1 else [])
    assert not (df.kind == "error").any()  # README: no Xid
    assert result.meta["clock"]["domain"] == "unix"


def test_clock_event_reason_bits():
    assert decode_clock_event_reasons(0x1 | 0x4 | 0x8) == ["GpuIdle", "SwPowerCap", "HwSlowdown"]
    assert decode_clock_event_reasons(0x800) == ["Unknown(0x800)"]


def test_superbench_monitor_per_gpu_keys(parse):
    path = corpus("public", "nvml", "superbench_monitor_nvml_8gpu.jsonl")
    records = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
    result, df = parse(path)
    util = df[df.name == "gpu.util"]
    assert len(util) == 8 * len(records)
    assert sorted(util.device.unique()) == list(range(8))
    assert util[(util.device == 3)].value.iloc[0] == records[0]["gpu_usage:3"]
    assert result.meta["clock"]["tz_assumed"] is True


def test_nvidia_smi_query_csv(parse):
    path = corpus("h200", "nvml", "nvidia-smi-query.csv")
    with open(path) as f:
        rows = list(csv.reader(f, skipinitialspace=True))
    result, df = parse(path)
    assert result.format == "nvidia_smi_csv"
    used = df[df.name == "mem.used"]
    assert len(used) == len(rows) - 1
    mib = float(rows[-1][5].split()[0])
    assert used.sort_values("ts").value.iloc[-1] == mib * 2**20
    assert set(used.unit) == {"bytes"}
    masks = [int(r[12], 16) for r in rows[1:]]
    assert (df.name == "ThrottleReason").sum() == 1 + sum(a != b for a, b in zip(masks, masks[1:]))


def test_nvidia_smi_csv_custom_header_without_units(parse):
    path = corpus("public", "nvml", "gpu_glasses_nvidia_smi_8gpu_idle.csv")
    lines = path.read_text().splitlines()[1:]
    result, df = parse(path)
    temp = df[df.name == "temp"]
    assert len(temp) == len([l for l in lines if l.strip()])
    assert set(temp.device) == set(range(8))  # the "gpu" column, not the constant "index"
    assert df[df.name == "mem.total"].value.iloc[0] == 81559 * 2**20


def test_dmon(parse):
    path = corpus("h200", "nvml", "nvidia-smi-dmon.txt")
    data = [l for l in path.read_text().splitlines() if l.strip() and not l.startswith("#")]
    result, df = parse(path)
    assert result.format == "nvidia_smi_dmon"
    power = df[df.name == "power"]
    assert len(power) == len(data)
    h, m, s = (int(x) for x in data[0].split()[0].split(":"))
    assert power.ts.min() == ((h * 60 + m) * 60 + s) * 10**9  # time of day, date unknown
    assert result.meta["clock"]["date_assumed"]


def test_nvidia_smi_q_inventory(parse):
    path = corpus("h200", "nvml", "nvidia-smi-q.txt")
    text = path.read_text()
    uuid = re.search(r"GPU UUID\s+: (\S+)", text).group(1)
    result, df = parse(path)
    assert result.format == "nvidia_smi_q"
    inv = df[df.name == "GpuInventory"]
    assert len(inv) == int(re.search(r"Attached GPUs\s+: (\d+)", text).group(1))
    attrs = json.loads(inv.iloc[0]["attrs"])
    assert attrs["uuid"] == uuid and attrs["name"] == "NVIDIA H200" and attrs["ecc_mode"] == "Enabled"
    assert attrs["driver"] == re.search(r"Driver Version\s+: (\S+)", text).group(1)
    assert result.meta["devices"][0]["uuid"] == uuid
    assert not (df.kind == "error").any()  # all ECC counters are 0 in this capture


def test_nvidia_smi_q_errors_from_counters(parse, tmp_path):
    text = corpus("h200", "nvml", "nvidia-smi-q.txt").read_text()
    damaged = re.sub(r"(DRAM Uncorrectable\s+: )0", r"\g<1>3", text, count=1)
    damaged = damaged.replace("Remapping Failure Occurred                     : No",
                              "Remapping Failure Occurred                     : Yes")
    p = tmp_path / "q.txt"
    p.write_text(damaged)
    _, df = parse(p)
    errors = df[df.kind == "error"].set_index("name")
    assert errors.loc["EccUncorrectable", "value"] == 3
    assert "RowRemapFailure" in errors.index


def test_nvidia_smi_table_and_topo(parse):
    result, df = parse(corpus("h200", "nvml", "nvidia-smi.txt"))
    assert result.format == "nvidia_smi_table"
    s = df.set_index("name")
    assert s.loc["power.limit", "value"] == 700 and s.loc["mem.total", "value"] == 143771 * 2**20
    result, df = parse(corpus("h200", "nvml", "nvidia-smi-topo.txt"))
    assert result.format == "nvidia_smi_topo"
    attrs = json.loads(df.iloc[0]["attrs"])
    assert attrs["cpu_affinity"] == "0-15" and attrs["label"] == "GPU0"


def test_dcgm_exporter_metrics_drop_blank_sentinel(parse):
    path = corpus("public", "nvml", "dcgm_exporter_readme_metrics_sample.prom")
    samples = [l for l in path.read_text().splitlines() if l.startswith("DCGM_FI_")]
    result, df = parse(path)
    assert result.format == "dcgm"
    assert len(df) == len(samples) - sum("9223372036854775794" in l for l in samples)
    assert df.set_index("name").loc["clock.sm", "value"] == 139
    assert any("blank sentinel" in w for w in result.warnings)


def test_dcgm_xid_and_throttle(parse, tmp_path):
    p = tmp_path / "m.prom"
    p.write_text('# HELP DCGM_FI_DEV_XID_ERRORS x\nDCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-x"} 79 1700000000000\n'
                 'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu="1"} 12 1700000000000\n')
    result, df = parse(p)
    xid = df[df.name == "Xid"].iloc[0]
    assert xid.kind == "error" and xid.device == 1 and xid.ts == 1700000000000 * 10**6
    assert json.loads(df[df.name == "ThrottleReason"].iloc[0]["attrs"])["reasons"] == ["SwPowerCap", "HwSlowdown"]


def test_dcgm_counter_config_is_configuration(parse):
    path = corpus("public", "nvml", "dcgm_exporter_default-counters.csv")
    enabled = [l for l in path.read_text().splitlines() if l.startswith("DCGM_")]
    result, df = parse(path)
    assert result.format == "dcgm_exporter_config" and len(df) == 1
    assert len(json.loads(df.iloc[0]["attrs"])["enabled"]) == len(enabled)
