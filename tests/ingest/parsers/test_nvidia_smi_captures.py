"""Real nvidia-smi captures (tests/fixtures/captures, see SOURCES.md): `-q` text across driver
versions, Windows and MIG; `-q -x` XML read as XML with the same rows; `pmon` as per-process
samples, never device utilisation."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnosis.engine.pipeline import run

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "captures"
Q = CAPTURES / "nvidia_smi"
XML = CAPTURES / "nvidia_smi_xml"


def _errors(df) -> set[str]:
    return set(df[df.kind == "error"].name.astype(str))


def _attrs(df, name: str) -> list[dict]:
    return [json.loads(a) for a in df[df.name == name]["attrs"]]


# ---- nvidia-smi -q ------------------------------------------------------------------

def test_windows_remapped_rows_printed_as_a_value(parse):
    """The 610 driver prints `Remapped Rows : N/A` on a GeForce: a value where a section was."""
    result, df = parse(Q / "windows_rtx3060_laptop_610_remapped_rows_na.txt")
    assert result.format == "nvidia_smi_q" and not result.error
    inv = _attrs(df, "GpuInventory")[0]
    assert inv["driver"] == "610.88" and inv["cuda"] == "13.3"  # "[Deprecated; ...]" suffix dropped
    assert inv["driver_model"] == "WDDM" and inv["remapped_rows"] == {}
    s = df[df.kind == "sample"].set_index("name")
    assert s.loc["power.limit", "value"] == 80.0  # under "GPU Ceiling Power Limit" since 610
    assert s.loc["mem.total", "value"] == 6144 * 2**20 and s.loc["temp", "value"] == 38
    assert "proc.mem.used" not in s.index  # "Not available in WDDM driver model"
    assert not _errors(df)


def test_eight_a100s_every_gpu_and_no_false_errors(parse):
    result, df = parse(Q / "a100_sxm4_8gpu_535_nvidia_smi_a.txt")
    inv = _attrs(df, "GpuInventory")
    assert len(inv) == 8 and {i["name"] for i in inv} == {"NVIDIA A100-SXM4-40GB"}
    assert len({i["bus_id"] for i in inv}) == 8 and len(result.meta["devices"]) == 8
    assert len(df[df.name == "gpu.util"]) == 8
    assert not _errors(df)


def test_page_retirement_pending_is_an_error(parse):
    _, healthy = parse(Q / "azurehpc_8gpu_535_page_retirement.txt")
    assert not _errors(healthy)
    _, df = parse(Q / "azurehpc_8gpu_535_page_retirement_pending.txt")
    assert {"RetiredPages", "RetiredPagesPending"} <= _errors(df)
    pending = df[df.name == "RetiredPagesPending"]
    assert set(pending.device) == {1, 3, 5, 7} or len(pending) >= 1


def test_pasted_without_banner_and_with_cuts(parse):
    """A doc excerpt: no "==NVSMI LOG==" banner, "[...]" where lines were cut."""
    result, df = parse(Q / "ml_engineering_a100_510_xid63_remap_pending_excerpt.txt")
    assert result.format == "nvidia_smi_q"
    assert {"EccCorrectable", "RowRemapPending"} <= _errors(df)
    assert df[df.name == "EccCorrectable"].value.max() == 177


@pytest.mark.parametrize("name", ["netdata_issue4892_gtx960m_410_excerpt.txt",
                                  "nvidia_docker_issue954_gtx1080_396_excerpt.txt",
                                  "gputil_issue38_windows_gtx1080ti_442_excerpt.txt",
                                  "windows_rtx4070_laptop_566_wddm.txt"])
def test_old_drivers_and_windows(parse, name):
    result, df = parse(Q / name)
    assert result.format == "nvidia_smi_q" and not result.error
    assert len(df[df.name == "GpuInventory"]) == 1


def _q(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "q.txt"
    p.write_text(text)
    return p


HEAD = """
==============NVSMI LOG==============

Timestamp                                 : {stamp}
Driver Version                            : 550.54.15
CUDA Version                              : 12.4

Attached GPUs                             : 1
GPU 00000000:07:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
"""


def test_mig_devices_processes_and_sections_as_values(parse, tmp_path):
    """The layout nvidia-smi documents for MIG mode, a process with its details under
    "Process ID", and sections printed as values: all read, none crash."""
    text = HEAD.format(stamp="Mon Mar  4 10:00:00 2024") + """\
    MIG Mode
        Current                           : Enabled
        Pending                           : Enabled
    MIG Devices
        Device 0
            GPU Instance ID               : 1
            Compute Instance ID           : 0
            Device Attributes
                Shared
                    Multiprocessor count  : 16
            ECC Errors
                Volatile
                    SRAM Uncorrectable    : 2
            FB Memory Usage
                Total                     : 9984 MiB
                Used                      : 13 MiB
    FB Memory Usage                       : N/A
    Utilization
        Gpu                               : N/A
    Remapped Rows                         : N/A
    Clocks Event Reasons                  : N/A
    Processes
        GPU instance ID                   : 1
        Compute instance ID               : 0
        Process ID                        : 4242
            Type                          : C
            Name                          : python
            Used GPU Memory               : 500 MiB
        GPU instance ID                   : 1
        Compute instance ID               : 0
        Process ID                        : 4243
            Type                          : C
            Name                          : [Not Found]
            Used GPU Memory               : [N/A]
"""
    result, df = parse(_q(tmp_path, text))
    inv = _attrs(df, "GpuInventory")[0]
    assert inv["mig_mode"] == "Enabled" and inv["mig_devices"][0]["memory_total"] == 9984 * 2**20
    assert df[df.name == "EccUncorrectable"].value.max() == 2  # the MIG instance's SRAM errors
    procs = df[df.name == "proc.mem.used"]
    assert list(procs.pid) == [4242] and procs.value.iloc[0] == 500 * 2**20
    assert "gpu.util" not in set(df.name.astype(str))


def test_repeated_snapshots_are_separate_points_in_time(parse, tmp_path):
    """`nvidia-smi -q -l 5`: one banner per snapshot; the clock reasons change between them."""
    reasons = """    Clocks Throttle Reasons
        Idle                              : Not Active
        SW Power Cap                      : {cap}
        HW Slowdown                       : Not Active
            HW Thermal Slowdown           : {hw}
"""
    text = (HEAD.format(stamp="Mon Mar  4 10:00:00 2024") + reasons.format(cap="Not Active", hw="Not Active")
            + HEAD.format(stamp="Mon Mar  4 10:00:05 2024") + reasons.format(cap="Active", hw="Active"))
    result, df = parse(_q(tmp_path, text))
    assert len(df[df.name == "GpuInventory"]) == 2 and len(result.meta["devices"]) == 1
    throttle = df[df.name == "ThrottleReason"].sort_values("ts")
    assert len(throttle) == 2 and throttle.ts.iloc[1] - throttle.ts.iloc[0] == 5 * 10**9
    assert set(json.loads(throttle["attrs"].iloc[1])["slowdown"]) == {"SwPowerCap", "HwThermalSlowdown"}


# ---- nvidia-smi -q -x ---------------------------------------------------------------

@pytest.mark.parametrize("path", sorted(XML.glob("*.xml")), ids=lambda p: p.name)
def test_xml_reports_read_as_xml(parse, path):
    result, df = parse(path)
    assert result.format == "nvidia_smi_xml" and not result.error
    inv = _attrs(df, "GpuInventory")
    assert inv and all(i["name"] for i in inv)
    assert "log" not in set(df.kind.astype(str))
    assert (df[df.name == "mem.total"].value > 0).all()


def test_xml_mig_mode_remapped_rows_na_and_mig_devices(parse):
    _, df = parse(XML / "telegraf_a100-sxm4-v12.xml")
    assert _attrs(df, "GpuInventory")[0]["remapped_rows"] == {}  # <remapped_rows>N/A</remapped_rows>
    _, df = parse(XML / "netdata_a100-sxm4-mig.xml")
    inv = _attrs(df, "GpuInventory")[0]
    assert inv["mig_mode"] == "Enabled" and len(inv["mig_devices"]) >= 2


def test_xml_and_text_give_the_same_rows(parse, tmp_path):
    """Damaged memory and a thermal slowdown in XML: the rows the -q text parser emits, so
    gpu.ecc and gpu.throttling fire on either."""
    xml = (XML / "netdata_rtx-4090-driver-535.xml").read_text()
    xml = xml.replace("<remapped_row_unc>0</remapped_row_unc>", "<remapped_row_unc>2</remapped_row_unc>")
    xml = xml.replace("<remapped_row_failure>No</remapped_row_failure>",
                      "<remapped_row_failure>Yes</remapped_row_failure>")
    xml = xml.replace("<clocks_event_reason_sw_thermal_slowdown>Not Active",
                      "<clocks_event_reason_sw_thermal_slowdown>Active")
    p = tmp_path / "damaged.xml"
    p.write_text(xml)
    _, df = parse(p)
    assert {"RowRemapUncorrectable", "RowRemapFailure"} <= _errors(df)
    assert "SwThermalSlowdown" in json.loads(df[df.name == "ThrottleReason"]["attrs"].iloc[0])["slowdown"]
    report = run([p])
    assert {"gpu.ecc", "gpu.throttling"} <= {f.root_cause for f in report.findings}


@pytest.mark.parametrize("doc,why", [
    ('<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
     "<nvidia_smi_log><driver_version>&b;</driver_version></nvidia_smi_log>", "internal subset"),
    ('<?xml version="1.0"?><!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">'
     '<nvidia_smi_log><gpu id="0"><product_name>&ext;</product_name></gpu></nvidia_smi_log>', "well-formed"),
    ('<?xml version="1.0"?>\n<nvidia_smi_log>\n<gpu id="00000000:01:00.0">\n<product_name>T4', "well-formed"),
])
def test_xml_entities_dtds_and_truncation_are_refused(parse, tmp_path, doc, why):
    p = tmp_path / "evil.xml"
    p.write_text(doc)
    result, df = parse(p)
    assert df is None and not result.internal_error
    assert result.error.startswith("evil.xml: line ") and why in result.error


# ---- nvidia-smi pmon ----------------------------------------------------------------

def test_pmon_is_per_process_not_device_utilisation(parse):
    result, df = parse(CAPTURES / "nvidia_smi_pmon" / "sonar_4gpu_pmon_s_mu.txt")
    assert result.format == "nvidia_smi_pmon"
    names = set(df.name.astype(str))
    assert not names & {"gpu.util", "mem.util", "mem.used"}
    assert {"proc.sm.util", "proc.mem.util", "proc.mem.used"} <= names
    fb = df[(df.name == "proc.mem.used") & (df.pid == 2233095)]
    assert fb.value.iloc[0] == 24395 * 2**20 and fb.device.iloc[0] == 1
    assert json.loads(fb["attrs"].iloc[0])["process"] == "python3"
    assert (df.pid > 0).all()


def test_pmon_idle_rows_and_date_time(parse, tmp_path):
    p = tmp_path / "pmon.txt"
    p.write_text("#Date       Time        gpu         pid  type    sm   mem   enc   dec   jpg   ofa   command\n"
                 "#YYYYMMDD   HH:MM:SS    Idx           #   C/G     %     %     %     %     %     %   name\n"
                 " 20240104   13:54:35      0          -     -     -     -     -     -     -     -   -\n"
                 " 20240104   13:54:35      1      31381     C    33    53     -     -     -     -   my job.py\n")
    result, df = parse(p)
    assert result.format == "nvidia_smi_pmon" and result.meta["processes_seen"] == 1
    assert set(df.name.astype(str)) == {"proc.sm.util", "proc.mem.util"}
    assert json.loads(df["attrs"].iloc[0])["process"] == "my job.py"
    assert result.meta["clock"]["domain"] == "unix"


def test_dmon_stays_dmon(parse):
    result, df = parse(CAPTURES / "nvidia_smi_dmon" / "xuesongtap_dmon_s_mutc_o_TD.txt")
    assert result.format == "nvidia_smi_dmon"
    assert len(df[df.name == "gpu.util"]) == 5


def test_hostile_shapes_stay_cheap(parse, tmp_path):
    """Indentation 2,000 levels deep, 20,000 repeats of one key, a 200 KB line: read in linear
    time, the tree kept shallow (attrs must still serialise), no crash."""
    deep = "".join(" " * i + f"K{i}\n" for i in range(4, 2_004))
    repeats = "    Process ID : 1\n" * 20_000
    text = HEAD.format(stamp="Mon Mar  4 10:00:00 2024") + deep + repeats + "    Name : " + "x " * 100_000 + "\n"
    result, df = parse(_q(tmp_path, text))
    assert result.format == "nvidia_smi_q" and not result.error
    assert len(df[df.name == "GpuInventory"]) == 1


def test_windows_table_tcc_wddm_column(parse, tmp_path):
    """The default table on Windows has TCC/WDDM where Linux has Persistence-M (lines as posted
    in microsoft/WSL#9134)."""
    p = tmp_path / "smi.txt"
    p.write_text(
        "Wed Nov  9 21:31:58 2022\n"
        "+-----------------------------------------------------------------------------+\n"
        "| NVIDIA-SMI 517.48       Driver Version: 517.48       CUDA Version: 11.7     |\n"
        "|-------------------------------+----------------------+----------------------+\n"
        "| GPU  Name            TCC/WDDM | Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
        "| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |\n"
        "|                               |                      |               MIG M. |\n"
        "|===============================+======================+======================|\n"
        "|   0  NVIDIA GeForce ... WDDM  | 00000000:0A:00.0  On |                  N/A |\n"
        "|  0%   31C    P8    16W / 250W |    576MiB / 11264MiB |      0%      Default |\n"
        "|                               |                      |                  N/A |\n"
        "+-------------------------------+----------------------+----------------------+\n")
    result, df = parse(p)
    assert result.format == "nvidia_smi_table"
    assert df.set_index("name").loc["power.limit", "value"] == 250
