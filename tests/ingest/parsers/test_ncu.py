"""Nsight Compute CSV (raw and details pages), checked with the csv module directly."""
from __future__ import annotations

import csv

import pytest

from ingest.engine.events import EventSink, ParseError, ParseReport
from ingest.engine.parsers.ncu import csv_export as ncu_csv
from tests.corpus import corpus
from tests.ingest.parsers.helpers import attrs, parse_to_frame


def _table(path):
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    rows = list(csv.reader(lines[start:]))
    return rows[0], rows[1:]


def _num(text):
    return float(text.replace(",", ""))


def test_raw_page_one_kernel_row_per_launch(tmp_path, corpus_dir):
    path = corpus("h200", "ncu", "ncu_raw.csv")
    header, rows = _table(path)
    units, data = rows[0], rows[1:]
    frame, report = parse_to_frame(path, tmp_path)
    assert report.meta["page"] == "raw"
    kernels = frame[frame["kind"] == "kernel"]
    assert len(kernels) == len(data) == 6
    col = {h: i for i, h in enumerate(header)}
    assert units[col["gpu__time_duration.sum"]] == "ns"
    for row, name, dur, a in zip(data, kernels["name"], kernels["dur"], attrs(kernels)):
        assert name == row[col["Kernel Name"]]
        assert dur == round(_num(row[col["gpu__time_duration.sum"]]))
        assert a["compute_throughput_pct"] == _num(row[col["sm__throughput.avg.pct_of_peak_sustained_elapsed"]])
        assert a["memory_throughput_pct"] == _num(
            row[col["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"]])
        assert a["bottleneck"] in ("compute", "memory", "latency")


def test_details_page_samples_rules_and_verdicts(tmp_path, corpus_dir):
    path = corpus("h200", "ncu", "ncu_details.csv")
    header, rows = _table(path)
    col = {h: i for i, h in enumerate(header)}
    metric_rows = [r for r in rows if r[col["Metric Name"]]]
    rule_rows = [r for r in rows if len(r) > col["Rule Name"] and r[col["Rule Name"]]]
    frame, report = parse_to_frame(path, tmp_path)
    assert report.meta["page"] == "details"
    assert (frame["kind"] == "sample").sum() == len(metric_rows)
    markers = frame[frame["kind"] == "marker"]
    assert len(markers) == len(rule_rows) > 0
    for r, name, sev, a in zip(rule_rows, markers["name"], markers["severity"], attrs(markers)):
        assert name == r[col["Rule Name"]] and a["rule_type"] == r[col["Rule Type"]]
        assert sev == {"OPT": "warning", "WRN": "warning", "INF": "info"}[r[col["Rule Type"]]]
        speedup = r[col["Estimated Speedup"]]
        assert a["estimated_speedup"] == (float(speedup) if speedup else None)
        assert a["kernel"] == r[col["Kernel Name"]]
    occupancy = [a for n, a in zip(markers["name"], attrs(markers)) if n == "AchievedOccupancy"]
    assert occupancy and all(a["estimated_speedup_type"] == "local" for a in occupancy)
    # our SOL verdict agrees with Nsight Compute's own SOLBottleneck rule text
    verdict = {a["id"]: a["bottleneck"] for a in attrs(frame[frame["kind"] == "kernel"])}
    for r in rule_rows:
        if r[col["Rule Name"]] != "SOLBottleneck":
            continue
        text = r[col["Rule Description"]]
        if "latency issues" in text:
            assert verdict[r[col["ID"]]] == "latency"
        elif text.startswith("Compute is more heavily utilized"):
            assert verdict[r[col["ID"]]] == "compute"
        elif text.startswith("Memory is more heavily utilized"):
            assert verdict[r[col["ID"]]] == "memory"


def test_ncu_console_output_with_program_stdout(tmp_path, corpus_dir):
    """superbench's log is `ncu --csv` console output (details page): ncu_csv reads it."""
    path = corpus("public", "ncu", "superbench_cublaslt_ncu_sm100.log")
    header, rows = _table(path)
    frame, report = parse_to_frame(path, tmp_path)
    assert report.format == "ncu_csv" and report.meta["preamble_lines"] == 3
    assert (frame["kind"] == "kernel").sum() == 1
    assert (frame["kind"] == "sample").sum() == sum(1 for r in rows if r[12])


def test_csv_that_is_not_ncu(tmp_path, corpus_dir):
    path = corpus("h200", "nvml", "nvidia-smi-query.csv")
    with pytest.raises(ParseError) as e:
        ncu_csv.parse(path, EventSink("a", "ncu", lambda b: None), ParseReport())
    assert "nvidia-smi-query.csv" in str(e.value) and "line 1" in str(e.value)


def test_row_with_missing_fields_is_skipped_and_counted(tmp_path, corpus_dir):
    lines = corpus("h200", "ncu", "ncu_raw.csv").read_text().splitlines()
    lines[-1] = lines[-1].rsplit(",", 5)[0]
    path = tmp_path / "cut.csv"
    path.write_text("\n".join(lines) + "\n")
    frame, report = parse_to_frame(path, tmp_path)
    assert (frame["kind"] == "kernel").sum() == 5
    assert report.skipped["ncu row with a wrong number of fields"] == 1
    assert any(f"line {len(lines)}" in w for w in report.warnings)
