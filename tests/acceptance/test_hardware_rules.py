"""Hardware rules on inputs derived at run time from real captures (the corpus shows a healthy
GPU; these edit one number the way a sick one would report it) and on the kernel's Xid line."""
import json

import pyarrow as pa

from diagnosis import scenarios
from ingest.events import make_batch
from rules.compiler import compile_rule
from rules.evaluator import evaluate_rules
from rules.features import TraceContext
from rules.loader import load_rule_dirs
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
    assert "copy_kernel" in findings[0]["explanation"] and "91.2%" in findings[0]["explanation"]
