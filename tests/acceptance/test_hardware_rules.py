"""Hardware rules on inputs derived at run time from real captures (the corpus shows a healthy
GPU; these edit one number the way a sick one would report it) and on the kernel's Xid line."""
import json

import pyarrow as pa

from diagnosis.engine import scenarios
from rules.engine.severity import RANK
from ingest.engine.events import make_batch
from rules.engine.compiler import compile_rule
from rules.engine.evaluator import evaluate_rules
from rules.engine.features import TraceContext
from rules.engine.loader import load_rule_dirs
from tests.corpus import corpus

HW_SLOWDOWN, SW_POWER_CAP = 0x8, 0x4


def roots(path):
    return {f["root_cause"]: f for f in scenarios.report(path)["findings"]}


def test_clock_slowdown_while_busy_is_throttling(tmp_path, corpus_dir):
    lines = corpus("h200", "nvml", "nvml_samples.jsonl").read_text().splitlines()[:400]
    out = []
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if 100 <= i < 200:  # a power-capped, hardware-slowed stretch under load
            rec.update(throttle_reasons=HW_SLOWDOWN | SW_POWER_CAP, util_gpu=100)
        out.append(json.dumps(rec))
    path = tmp_path / "nvml_samples.jsonl"
    path.write_text("\n".join(out) + "\n")
    found = roots(path)
    assert found["gpu.throttling"]["severity"] == "warning"
    assert "HwSlowdown" in found["gpu.throttling"]["explanation"]


def test_idle_clock_reasons_are_not_throttling(corpus_dir):
    assert "gpu.throttling" not in roots(corpus("h200", "nvml", "nvml_samples.jsonl"))


def test_xid_in_the_kernel_log_is_critical(tmp_path):
    path = tmp_path / "dmesg.log"
    path.write_text("[Sat Nov 29 08:00:00 2026] NVRM: Xid (PCI:0000:18:00): 79, pid=4242, name=python, "
                    "GPU has fallen off the bus.\n")
    xid = roots(path)["gpu.xid"]
    assert xid["severity"] == "critical" and "Xid 79" in xid["explanation"]


def test_uncorrectable_ecc_in_nvidia_smi_q(tmp_path, corpus_dir):
    text = corpus("h200", "nvml", "nvidia-smi-q.txt").read_text()
    volatile = text.index("        Volatile")
    edited = text[:volatile] + text[volatile:].replace("DRAM Uncorrectable                         : 0",
                                                       "DRAM Uncorrectable                         : 3", 1)
    path = tmp_path / "nvidia-smi-q.txt"
    path.write_text(edited)
    assert roots(path)["gpu.ecc"]["severity"] == "critical"
    assert "gpu.ecc" not in roots(corpus("h200", "nvml", "nvidia-smi-q.txt"))


def test_memory_bound_kernel_rule_reads_the_ncu_verdict():
    rule = next(r for r in load_rule_dirs(None) if r.id == "kernel.memory-bound")
    attrs = json.dumps({"bottleneck": "memory", "memory_throughput_pct": 91.2, "compute_throughput_pct": 12.5})
    batch = make_batch({"ts": [0, 0], "kind": ["kernel", "kernel"], "source": ["ncu", "ncu"],
                        "name": ["copy_kernel", "gemm"],
                        "attrs": [attrs, attrs.replace("memory\"", "compute\"")]})
    events = pa.Table.from_batches([batch]).to_pandas()
    findings, errors = evaluate_rules([compile_rule(rule)], TraceContext(events))
    assert not errors and len(findings) == 1
    assert "copy_kernel" in findings[0].explanation and "91.2%" in findings[0].explanation


def _found(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    report = scenarios.report(path)
    return report, {f["root_cause"]: f for f in sorted(report["findings"], key=lambda f: RANK[f["severity"]])}


def test_xid_severity_follows_nvidias_catalog(tmp_path):
    """IGNORE -> info, RESTART_APP -> error, RESET_GPU / reboot -> critical."""
    cases = {
        "NVRM: Xid (PCI:0000:00:05): 43, pid=1045242, name=pt_main_thread, Ch 00000008": "info",
        "NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception": "error",
        "NVRM: Xid (0000:01:00): 31, Ch 0000000b, engmask 00000120, intr 10000000": "error",
        "NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of waiting for RPC": "critical",
        "NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)": "critical",
        "NVRM: Xid (PCI:0000:04:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 00 (0x00000004 0x00000001)": "warning",
    }
    for n, (line, severity) in enumerate(cases.items()):
        _, found = _found(tmp_path, f"dmesg{n}.log", f"[Sat Nov 29 08:00:00 2026] {line}\n")
        assert found["gpu.xid"]["severity"] == severity, line
        assert "catalog" in found["gpu.xid"]["explanation"]


def test_gpu_off_the_bus_without_an_xid_number(tmp_path):
    for n, text in enumerate(("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
                              "               NVRM: fallen off the bus and is not responding to commands.\n",
                              "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error\n")):
        report, found = _found(tmp_path, f"node{n}.log", text)
        assert found["gpu.xid"]["severity"] == "critical", text
        assert "fall" in found["gpu.xid"]["explanation"]


def test_memory_reports_are_gpu_ecc(tmp_path):
    texts = ["Dec  2 11:38:47 worker4 kernel: [  219.470994] NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', "
             "name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer.\n",
             "GPU 3 had uncorrectable memory errors and row remapping failed.\n",
             "E tensorflow/core] CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error encountered\n",
             "|   0  Tesla V100-SXM2...  On   | 00000000:06:00.0 Off |                    2 |\n"]
    for n, text in enumerate(texts):
        _, found = _found(tmp_path, f"mem{n}.log", text)
        assert found["gpu.ecc"]["severity"] == "critical", text
        assert "cuda.kernel_fault" not in found
    _, found = _found(tmp_path, "dmesg.log", "NVRM: Xid (PCI:0000:00:08): 94, pid='<unknown>', name=<unknown>, "
                                             "Contained: SM (0x1). RST: No, D-RST: No\n")
    assert found["gpu.ecc"]["severity"] == "error" and found["gpu.xid"]["severity"] == "error"


def test_throttling_seen_in_samples_a_second_apart_asks_for_an_nvml_burst(tmp_path):
    """nvidia-smi's CSV logger samples once a second: the finding's plan asks the agent for NVML at
    100 Hz; the same slowdown in NVML samples (the agent's own, or a burst) asks for nothing."""
    header = ("timestamp, index, utilization.gpu [%], clocks.sm [MHz], power.draw [W], "
              "clocks_event_reasons.active")
    rows = [f"2026/12/01 10:00:{s:02d}.000, 0, 100 %, {1410 if 10 <= s < 20 else 1980} MHz, 700.00 W, "
            f"{'0x000000000000000C' if 10 <= s < 20 else '0x0000000000000000'}" for s in range(40)]
    path = tmp_path / "nvidia_smi_query.csv"
    path.write_text("\n".join([header] + rows) + "\n")
    found = roots(path)["gpu.throttling"]
    assert found["capture"]["kind"] == "nvml_burst" and found["capture"]["duration_s"] == 30
    lines = corpus("h200", "nvml", "nvml_samples.jsonl").read_text().splitlines()[:400]
    burst = tmp_path / "burst" / "nvml_samples.jsonl"
    burst.parent.mkdir()
    burst.write_text("\n".join(json.dumps({**json.loads(line), "throttle_reasons": HW_SLOWDOWN, "util_gpu": 100})
                               for line in lines) + "\n")
    assert roots(burst)["gpu.throttling"].get("capture") is None
