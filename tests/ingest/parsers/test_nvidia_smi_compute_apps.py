"""`nvidia-smi --query-compute-apps` CSV (tests/fixtures/captures/nvidia_smi_compute_apps, see
SOURCES.md) is per-process GPU memory: `proc.mem.used` samples in bytes with the pid and the
process name, with or without a header and units; never a plain log (issue 33)."""
from __future__ import annotations

from pathlib import Path

import pytest

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "captures" / "nvidia_smi_compute_apps"
MIB = 2**20


def _procs(df) -> dict[int, tuple[float, str]]:
    rows = df[df.name == "proc.mem.used"]
    return {int(r.pid): (r.value, r.a["process"]) for r in rows.itertuples()}


def test_eight_gpus_one_process_each(parse):
    result, df = parse(CAPTURES / "eight_h200_gpu_uuid_pid_name_mem_excerpt.csv")
    assert result.format == "nvidia_smi_compute_apps" and not result.error
    procs = _procs(df)
    assert len(procs) == 8 and procs[1328667] == (130004 * MIB, "/usr/local/bin/python3.10")
    assert procs[1758887] == (58060 * MIB, "[Not Found]")
    assert set(df.kind) == {"sample"} and set(df.device) == {-1}  # the query names no GPU index
    uuids = {a["gpu_uuid"] for a in df.a}
    assert len(uuids) == 8 and "GPU-28780eb0-24d5-1f13-59b8-ae5c23617a72" in uuids


@pytest.mark.parametrize("name, expected", [
    ("l40s_triton_pid_name_mem_excerpt.csv", {44378: (1836 * MIB, "tritonserver"), 52114: (6294 * MIB, "/usr/bin/python3")}),
    ("vllm_two_engines_pid_name_mem_excerpt.csv", {3858903: (6265 * MIB, "VLLM::EngineCore")}),
    ("windows_ollama_header_nounits_excerpt.csv", {27220: (12497 * MIB, "ollama.exe")}),  # nounits: MiB by header
    ("rtx3090_timestamp_gpu_name_header_excerpt.csv", {1106871: (23342 * MIB, "/app/llama-server")}),
    ("rtx3090_timestamp_noheader_nounits_excerpt.csv", {1106871: (23342 * MIB, "/app/llama-server")}),
    ("nvidia_gpu_exporter_h100_590_all_fields_excerpt.csv", {11327: (2566 * MIB, "/root/tools/memhog"),
                                                             11345: (15690 * MIB, "./gpu_burn")}),
    ("h100_compute_apps.csv", {517: (3590 * MIB, "python3")}),
    ("h100_compute_apps_noheader.csv", {517: (3590 * MIB, "python3")}),
    ("h100_compute_apps_noheader_nounits.csv", {517: (3590 * MIB, "python3")}),
    ("h100_compute_apps_all_fields.csv", {517: (3590 * MIB, "python3")}),
])
def test_header_units_variants(parse, name, expected):
    result, df = parse(CAPTURES / name)
    assert result.format == "nvidia_smi_compute_apps" and not result.error
    procs = _procs(df)
    assert {pid: procs[pid] for pid in expected} == expected


def test_all_fields_keep_the_gpu_identity(parse):
    _, df = parse(CAPTURES / "h100_compute_apps_all_fields.csv")
    (a,) = df.a
    assert a["gpu_name"] == "NVIDIA H100 80GB HBM3" and a["gpu_bus_id"] == "00000000:00:06.0"
    assert a["gpu_uuid"].startswith("GPU-2fdaef07") and a["gpu_serial"] == "1652624817754"


def test_timestamped_rows_are_on_the_wall_clock(parse):
    result, df = parse(CAPTURES / "rtx3090_timestamp_noheader_nounits_excerpt.csv")
    assert result.meta["clock"]["domain"] == "unix" and result.meta["clock"]["tz_assumed"]
    assert df.ts.iloc[0] > 1.7e18
    assert df.a.iloc[0]["gpu_name"] == "NVIDIA GeForce RTX 3090"


def test_noheader_with_units(parse, tmp_path):
    """`--format=csv,noheader`: the same rows without their header line, read by the cells' shapes."""
    lines = (CAPTURES / "vllm_two_engines_pid_name_mem_excerpt.csv").read_text().splitlines()[1:]
    path = tmp_path / "smi_out.txt"
    path.write_text("\n".join(lines) + "\n")
    result, df = parse(path)
    assert result.format == "nvidia_smi_compute_apps"
    assert _procs(df) == {3858903: (6265 * MIB, "VLLM::EngineCore"), 3880364: (5530 * MIB, "VLLM::EngineCore")}


def test_header_alone_says_no_process(parse):
    result, df = parse(CAPTURES / "hami_mig_header_only_excerpt.csv")
    assert result.format == "nvidia_smi_compute_apps" and not result.error
    assert any("no compute process" in w for w in result.warnings)


def test_a_looping_capture_is_one_snapshot_per_interval(parse, tmp_path):
    """`-l 1` repeats the rows: a process seen again starts the next snapshot (ts = its index)."""
    rows = (CAPTURES / "vllm_two_engines_pid_name_mem_excerpt.csv").read_text().splitlines()
    path = tmp_path / "apps_loop.csv"
    path.write_text("\n".join(rows + rows[1:]) + "\n")
    _, df = parse(path)
    assert list(df.ts) == [0, 0, 1, 1]


def test_a_bare_three_column_table_is_not_claimed(parse, tmp_path):
    """Three bare cells per row (id, word, number) look like a headerless nounits query only
    when nothing says otherwise: without a uuid, a timestamp or a name that says so, it is not one."""
    path = tmp_path / "results.csv"
    path.write_text("1, adam, 3\n2, sgd, 4\n")
    result, _ = parse(path)
    assert result.format != "nvidia_smi_compute_apps"
