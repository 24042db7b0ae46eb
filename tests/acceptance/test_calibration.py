"""Issue 33, calibration: tracedoc's trace-level verdict on 38 public Kineto traces agrees with
what an expert concludes from each (tests/fixtures/calibration/MANIFEST.yaml; docs/calibration.md).

Each trace was labelled from facts read off the raw events (GPU busy share over the kernels' span,
kernel sizes, the split of idle time into short and long gaps, what the host was doing in the long
gaps, profiler steps) before tracedoc ran on it. The trace-level verdict is the set of root causes
among gpu.launch_bound, gpu.input_bound, gpu.idle_gaps and host.sync_stall that tracedoc reports,
plus whether it holds the trace to the step-time SLO:

| label | verdict that agrees |
|---|---|
| launch-bound | exactly {gpu.launch_bound} |
| input-bound | exactly {gpu.input_bound} |
| gpu-busy, healthy | none of them |

and a trace with fewer than two profiler steps is never reported against the step-time SLO (after
the first step, which carries warm-up, nothing is left to measure).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "calibration"
MANIFEST = yaml.safe_load((ROOT / "MANIFEST.yaml").read_text())["traces"]
TRACE_LEVEL = ("gpu.launch_bound", "gpu.input_bound", "gpu.idle_gaps", "host.sync_stall")
AGREES = {"launch-bound": {"gpu.launch_bound"}, "input-bound": {"gpu.input_bound"}, "gpu-busy": set(), "healthy": set()}


def trace_verdict(report: dict) -> tuple[set[str], set[str]]:
    """(trace-level root causes reported, SLOs reported violated)."""
    causes = {f["root_cause"] for f in report["findings"] if f["root_cause"] in TRACE_LEVEL}
    return causes, {v["slo"] for v in report["violations"]}


def test_manifest_is_complete():
    assert len(MANIFEST) >= 30
    assert {t["label"] for t in MANIFEST} == set(AGREES)
    for t in MANIFEST:
        assert (ROOT / t["file"]).is_file(), t["file"]
        assert t["source"].startswith("https://github.com/") and t["reason"], t["file"]
    assert sum(p.stat().st_size for p in ROOT.glob("*.gz")) < 12 * 2**20


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    from diagnosis.engine import scenarios  # Django-backed: imported by the tests that need it

    return {t["file"]: scenarios.report(ROOT / t["file"]) for t in MANIFEST}


def test_every_trace_is_read_as_a_kineto_trace(reports):
    """A refused file would raise nothing and pass as healthy: every fixture must be read."""
    for name, report in reports.items():
        (artifact,) = report["trace"]["artifacts"]
        assert artifact["format"] == "kineto" and artifact["events"] > 0, (name, artifact["warnings"])


def test_trace_level_verdict_agrees_with_every_label(reports, capsys):
    rows, wrong = [], []
    for t in MANIFEST:
        causes, slos = trace_verdict(reports[t["file"]])
        ok = causes == AGREES[t["label"]] and "step_time_p99" not in slos
        rows.append(f"| {t['file']} | {t['label']} | {', '.join(sorted(causes)) or '-'} | "
                    f"{', '.join(sorted(slos)) or '-'} | {'yes' if ok else 'NO'} |")
        if not ok:
            wrong.append(f"{t['file']}: labelled {t['label']} ({t['reason']}), tracedoc {sorted(causes)} {sorted(slos)}")
    with capsys.disabled():
        print("\n| trace | label | tracedoc trace-level | SLOs violated | agrees |\n|---|---|---|---|---|")
        print("\n".join(rows))
        print(f"agreement: {len(MANIFEST) - len(wrong)}/{len(MANIFEST)}")
    assert not wrong, "\n".join(wrong)


def test_a_single_profiler_step_is_not_held_to_the_step_slo(reports):
    """owlv2 holds one ProfilerStep (annotated on the CPU and on the GPU lane): the step-time SLI
    has nothing after the warm-up step, so no step SLO is evaluated, let alone violated."""
    name = "tracelens__h100__google_owlv2-large-patch14-ensemble__1016001.json.gz"
    assert not any(v["slo"] == "step_time_p99" for v in reports[name]["violations"])


def test_input_bound_says_how_much_of_the_window_the_loader_took(reports):
    name = "kineto__resnet50_num_workers_0__worker0.json.gz"
    finding = next(f for f in reports[name]["findings"] if f["root_cause"] == "gpu.input_bound")
    assert "DataLoader" in finding["explanation"]
    assert not any(f["root_cause"] == "host.sync_stall" for f in reports[name]["findings"])
