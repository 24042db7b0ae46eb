"""GPU health lines in text logs: NVIDIA driver Xid events (dmesg, journal, syslog, the k8s
device plugin, DCGM), a GPU that fell off the bus or is lost (with or without an Xid
number), and memory-error reports (DCGM health/diag messages, nvidia-smi text pasted into
a log). Each becomes one event with NVIDIA's reading of it in attrs.

Xid severity follows the immediate action of NVIDIA's Xid catalog
(docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), because that is what the
event means for the job: IGNORE -> info (e.g. 43: the application's channel was torn
down, the GPU is fine), RESTART_APP -> error (the application hit a fault and died: 13,
31, 94), RESET_GPU / reboot -> critical (the GPU is unusable until reset: 48, 79, 95,
119, ...). Teams that disagree override the rules, which select on the row's severity.

Patterns are fixed (ours), literal-led and bounded.
"""
from __future__ import annotations

import re

from ingest.engine.parsers.logs.cuda import Hit

# code -> (what it means, NVIDIA's immediate action, class). Classes: application (the
# running program faulted), memory (ECC / row remapping), nvlink, bus (GPU unreachable),
# firmware (GSP / micro-controller / driver), cleanup (a consequence of another Xid).
XID_CATALOG: dict[int, tuple[str, str, str]] = {
    8: ("GPU stopped processing (idle timeout)", "RESTART_APP", "application"),
    11: ("invalid or corrupted push buffer stream", "RESTART_APP", "application"),
    13: ("graphics engine exception: a kernel hit an illegal instruction, an out-of-range access or a "
         "device-side trap", "RESTART_APP", "application"),
    25: ("invalid or illegal push buffer stream", "RESTART_APP", "application"),
    31: ("GPU memory page fault (MMU fault): a kernel or copy touched an unmapped address",
         "RESTART_APP", "application"),
    32: ("invalid or corrupted push buffer stream", "RESTART_APP", "application"),
    37: ("driver firmware error", "IGNORE", "firmware"),
    38: ("driver firmware error", "IGNORE", "firmware"),
    39: ("copy engine exception", "RESTART_APP", "application"),
    40: ("copy engine exception", "RESTART_APP", "application"),
    41: ("copy engine exception", "RESTART_APP", "application"),
    43: ("GPU stopped processing: the driver reset an application's channel after it faulted or was "
         "killed; the GPU itself is healthy", "IGNORE", "application"),
    44: ("graphics engine fault during context switch", "IGNORE", "firmware"),
    45: ("preemptive cleanup of an application's channels after a previous error or a killed process",
         "IGNORE", "cleanup"),
    46: ("GPU stopped processing (GPU timeout)", "RESET_GPU", "firmware"),
    48: ("double-bit (uncorrectable) ECC error in GPU memory", "RESET_GPU", "memory"),
    54: ("auxiliary power is not connected to the GPU board", "CHECK_MECHANICALS", "bus"),
    56: ("display engine error", "RESTART_APP", "firmware"),
    57: ("error programming video memory interface", "RESET_GPU", "memory"),
    58: ("unstable video memory interface detected", "RESET_GPU", "memory"),
    60: ("video processor exception", "RESTART_APP", "application"),
    61: ("internal micro-controller breakpoint/warning", "RESET_GPU", "firmware"),
    62: ("internal micro-controller halt", "RESET_GPU", "firmware"),
    63: ("GPU memory row remapping / page retirement recorded; it takes effect at the next GPU reset",
         "IGNORE", "memory"),
    64: ("GPU memory row remapping / page retirement failed", "RESET_GPU", "memory"),
    65: ("video processor exception", "RESTART_APP", "application"),
    66: ("illegal access by driver", "IGNORE", "firmware"),
    67: ("illegal access by driver", "IGNORE", "firmware"),
    68: ("NVDEC0 exception", "RESTART_APP", "application"),
    69: ("graphics engine class error", "RESTART_APP", "application"),
    74: ("NVLink error", "RESET_GPU", "nvlink"),
    79: ("GPU has fallen off the bus: it stopped responding on PCIe (power, thermal, PCIe link or board "
         "failure)", "RESTART_BM", "bus"),
    80: ("corrupted data sent to GPU", "RESTART_APP", "application"),
    81: ("VGA subsystem error", "RESET_GPU", "firmware"),
    92: ("high single-bit (correctable) ECC error rate", "IGNORE", "memory"),
    93: ("non-fatal violation of provisioned InfoROM wear limit", "IGNORE", "firmware"),
    94: ("contained uncorrectable memory (ECC) error: the applications that touched it were stopped, "
         "the GPU keeps running", "RESTART_APP", "memory"),
    95: ("uncontained uncorrectable memory (ECC) error: every application on the GPU is affected",
         "RESET_GPU", "memory"),
    109: ("context switch timeout", "RESET_GPU", "firmware"),
    110: ("security fault error", "RESET_GPU", "firmware"),
    119: ("GSP RPC timeout: the GPU's system processor stopped answering the driver", "RESET_GPU", "firmware"),
    120: ("GSP error", "RESET_GPU", "firmware"),
    121: ("C2C link corrected error", "IGNORE", "nvlink"),
    136: ("link training failed", "RESET_GPU", "nvlink"),
    137: ("NVLink privilege error", "IGNORE", "nvlink"),
    140: ("unrecovered ECC error", "RESET_GPU", "memory"),
    141: ("CUDA fast path error", "IGNORE", "firmware"),
    143: ("GPU initialization failure", "RESET_GPU", "firmware"),
    144: ("NVLink SAW error", "RESET_GPU", "nvlink"),
    145: ("NVLink RLW error", "RESET_GPU", "nvlink"),
    146: ("NVLink TLW error", "RESET_GPU", "nvlink"),
    147: ("NVLink TREX error", "RESET_GPU", "nvlink"),
    148: ("NVLink NVLPW_CTRL error", "RESET_GPU", "nvlink"),
    149: ("NVLink NETIR error", "RESET_GPU", "nvlink"),
    150: ("NVLink MSE error", "RESET_GPU", "nvlink"),
    151: ("key rotation error", "RESTART_VM", "firmware"),
    154: ("GPU recovery action changed", "RESET_GPU", "firmware"),
    155: ("NVLink software-defined error", "RESET_GPU", "nvlink"),
    156: ("resource retirement event", "RESET_GPU", "memory"),
    157: ("resource retirement failure", "IGNORE", "memory"),
    158: ("GPU fatal timeout", "RESET_GPU", "firmware"),
    159: ("CHI non-data error", "IGNORE", "bus"),
    167: ("PCIe fatal timeout", "RESET_GPU", "bus"),
    169: ("internal micro-controller halt", "RESET_GPU", "firmware"),
}
_ACTION_SEVERITY = {"IGNORE": "info", "RESTART_APP": "error"}          # anything else: critical
_NVLINK5 = range(144, 151)

# "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., name=..., <detail>"; older drivers drop "PCI:"
_XID = re.compile(r"\bXid \(((?:PCI:)?[0-9a-fA-F]{1,8}(?::[0-9a-fA-F]{1,8}){1,3}(?:\.[0-9a-fA-F])?)\): (\d{1,4})\b,? ?")
_XID_PID = re.compile(r"^pid=(\d{1,10}|'<unknown>'),? ?(?:name=([^,]{0,200}),? ?)?")
_XID_CAUSED_BY = re.compile(r"caused by previous Xid (\d{1,4})")
_XID_RECOVERY = re.compile(r"to 0x([0-9a-fA-F]{1,4}) \(([^)]{1,60})\)")
_DEVICE_PLUGIN = re.compile(r"XidCriticalError: Xid=(\d{1,4}) on Device=([^\s,]{1,80})")
# the device plugin's klog of the NVML event itself: EventType 8 is nvmlEventTypeXidCriticalError
# (2 and 4 are the single/double-bit ECC event types; "Skipping non-..." lines are not Xids)
_PLUGIN_EVENT = re.compile(r"EventType:8 EventData:(\d{1,4})\b")
_DCGM_XID = re.compile(r"Detected XID (\d{1,4}) for GPU (\d{1,3})|an uncontained error \(XID (95)\)")
# the DCGM diagnostic's own verdict on the line that names the Xid: a failed test (NVSentinel's
# preflight JSON "event": "Test fail", dcgmi diag's "| Fail |" cell, the DCGM_FR_XID_ERROR code)
_DIAG_FAILED = re.compile(r"\bTest fail(?:ed|ure)?\b|\|\s{0,8}Fail(?:ed)?\s{0,8}\||\bDCGM_FR_XID_ERROR\b|"
                          r"\bdiag(?:nostic)?\b[^\n]{0,80}\bfail(?:ed|ure)?\b", re.I)
_AT_LEAST_WARNING = {"debug": "warning", "info": "warning"}
_FALLEN_PCI = re.compile(r"GPU (?:at )?(?:PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?)")
_GPU_LOST = re.compile(r"Unable to (?:determine|detect) the device handle for (?:GPU ?)?([0-9A-Fa-f:.]{7,20}): "
                       r"(Unknown Error|GPU is lost)|\bGPU is lost\b|NVML_ERROR_GPU_IS_LOST|NV_ERR_GPU_IS_LOST|"
                       r"GPU lost from the bus")
# the driver's calls into the GPU System Processor failing with status 0xf (NV_ERR_GPU_IS_LOST) say the
# same without the words: "rpcSendMessage failed with status 0x0000000f", "GspRmFree failed: ... status=0x0000000f"
_GSP_RPC_LOST = re.compile(r"(?:rpcSendMessage|GspRm\w{0,20}|rpcRmApi\w{0,30}|_issueRpcAndWait)[^\n]{0,160}?"
                           r"\bstatus[= ](?:0x)?0{0,7}[fF]\b")
# The driver lost its GPU System Processor without printing an Xid number (the banner and the
# heartbeat checks of the open kernel module): the condition Xid 119/120 report.
_GSP_TIMEOUT = re.compile(r"(?:GPU(\d{1,2}) )?(?:_kgspLogRpcTimeout: \*{3,60} ?GSP Timeout|_kgspIsHeartbeatTimedOut: Heartbeat "
                          r"timed out|_kgspRpcRecvPoll: GSP RM heartbeat timed out|Timeout waiting for RPC from GSP!|"
                          r"GSP RPC timeout|_kgspRpcRecvPoll: .{0,40}timed out)")
# NVSwitch errors: the kernel's "SXid (PCI:...): 12028, Non-fatal, Link 61 ..." and fabric manager's
# "detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci bus id ... port 61"
_SXID = re.compile(r"\bSXid \((?:PCI:)?([0-9a-fA-F:.]{7,20})\): (\d{1,6}), (Non-fatal|Fatal)\b,? ?(.{0,200})")
_FM_NVSWITCH = re.compile(r"detected NVSwitch (non-fatal|fatal) error (\d{1,6})(?: on fid \d{1,4})?"
                          r"(?: on NVSwitch pci bus id ([0-9a-fA-F:.]{7,20}))?(?: physical id (\d{1,3}))?(?: port (\d{1,4}))?")
_NVLINK_FATAL = re.compile(r"NVLink: fatal error detected on link (\d{1,3})")
# the driver could not bring the GPU up at all: it is as unusable as one that fell off the bus
_INIT_FAILED = re.compile(r"GPU ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d): RmInitAdapter failed! ?(\(0x[0-9a-fA-F:x]{1,30}\))?")
# DCGM health / diagnostic messages about memory (dcgm_errors.h)
_DCGM_MEMORY = (
    (re.compile(r"Detected (\d{1,9}) volatile double-bit ECC error\(s\) in GPU (\d{1,3})"), "EccUncorrectable",
     "critical"),
    (re.compile(r"double-bit ECC error has occur+ed on GPU (\d{1,3})"), "EccUncorrectable", "critical"),
    (re.compile(r"Pending page retirements together with a DBE were detected on GPU (\d{1,3})"), "EccUncorrectable",
     "critical"),
    # "had"/"has", with or without "uncorrectable" (DCGM versions, dcgmi diag tables)
    (re.compile(r"GPU (\d{1,3}) ha[sd] (?:uncorrectable )?memory errors and row remapping failed"), "RowRemapFailure",
     "critical"),
    (re.compile(r"GPU (\d{1,3}) ha[sd] (?:uncorrectable )?memory errors and row remappings? (?:are|is) pending"),
     "RowRemapPending", "warning"),
    (re.compile(r"A pending retired page has been detected in GPU (\d{1,3})"), "RetiredPagesPending", "warning"),
    (re.compile(r"Remapping Failure Occurred\s{0,40}:\s{0,4}Yes"), "RowRemapFailure", "critical"),
)
# a GPU row of the default nvidia-smi table pasted into a log: "|   0  Tesla K80  On | 00000000:00:1E.0 Off | 3 |"
_SMI_ROW = re.compile(r"^\|\s{1,6}(\d{1,2})\s{1,6}(\S.{0,40}?)\s{1,20}(?:On|Off)\s{1,6}\|\s{1,6}"
                      r"([0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s{1,6}\S{1,6}\s{1,6}\|\s{1,30}(\d{1,9})\s{1,4}\|")

# What a line must contain for classify_gpu_line to match (the line prefilter's words, matched
# case-insensitively; logs.prefilter): the literal each branch tests first. Keep in step.
GPU_LINE_WORDS = ("xid", "eventtype:8", "fallen off the bus", "device handle", "gpu is lost", "gpu_is_lost", "gsp",
                  "gpu lost from the bus", "rpcsendmessage",
                  "nvswitch", "nvlink: fatal error", "rminitadapter failed",
                  "uncorrectable", "pending page", "ecc", "remap", "retire")   # _memory_line
GPU_LINE_STARTS = "|"   # a GPU row of the nvidia-smi table


def xid_info(code: int, detail: str = "") -> dict:
    """What NVIDIA's catalog says about an Xid, with the severity for this occurrence."""
    meaning, action, klass = XID_CATALOG.get(code, ("not in NVIDIA's Xid catalog", "CONTACT_SUPPORT", "unknown"))
    severity = _ACTION_SEVERITY.get(action, "critical") if code in XID_CATALOG else "error"
    out = {"xid": code, "xid_meaning": meaning, "xid_action": action, "xid_class": klass}
    if code in _NVLINK5 and " Nonfatal " in f" {detail} ":
        severity = "warning"
    elif code == 154:
        m = _XID_RECOVERY.search(detail)
        if m:
            out["recovery_action"] = m.group(2).strip()
            severity = "info" if int(m.group(1), 16) == 0 else "critical"
    elif code == 45:
        cause = _XID_CAUSED_BY.search(detail)
        if cause:  # the cleanup follows another Xid: it is as bad as that one
            prior = xid_info(int(cause.group(1)))
            out.update(caused_by_xid=prior["xid"], caused_by_meaning=prior["xid_meaning"])
            severity = "critical" if int(cause.group(1)) in _NVLINK5 else prior["xid_severity"]
            out["xid_meaning"] = f"{meaning} (caused by Xid {prior['xid']}: {prior['xid_meaning']})"
    out["xid_severity"] = severity
    return out


def classify_gpu_line(body: str) -> Hit | None:
    """Xid / fell-off-the-bus / GPU-lost / memory-error lines, else None."""
    if "Xid" in body or "XID" in body or "EventType:8" in body:
        hit = _xid_line(body)
        if hit:
            return hit
    if "fallen off the bus" in body:
        return _fallen_off_bus(body)
    if "device handle" in body or "GPU is lost" in body or "GPU_IS_LOST" in body:
        m = _GPU_LOST.search(body)
        if m:
            return Hit("error", "GpuLost", {"pci": m.group(1) or "", "reason": (m.group(2) or m.group(0)).strip(),
                                            "text": body.strip()}, "critical")
    if "GSP" in body or "kgsp" in body or "Rpc" in body or "rpc" in body:
        m = _GSP_TIMEOUT.search(body)
        if m:
            return _inferred_xid(119, "a GSP timeout", body, f"GPU{m.group(1)} (driver numbering)" if m.group(1) else "")
        if _GSP_RPC_LOST.search(body):
            return Hit("error", "GpuLost", {"pci": "", "reason": "the driver's calls to the GPU System Processor fail "
                                            "with status 0xf (NV_ERR_GPU_IS_LOST): the GPU stopped answering",
                                            "text": body.strip()}, "critical")
    if "NVSwitch" in body or "SXid" in body:
        hit = _nvswitch_line(body)
        if hit:
            return hit
    if "NVLink: fatal error" in body:
        m = _NVLINK_FATAL.search(body)
        if m:
            return _inferred_xid(74, f"an NVLink fatal error on link {m.group(1)}", body)
    if "RmInitAdapter failed" in body:
        m = _INIT_FAILED.search(body)
        if m:
            return Hit("error", "GpuLost", {"pci": m.group(1), "reason": f"the driver could not initialise the GPU "
                                            f"(RmInitAdapter failed {m.group(2) or ''})".replace(" )", ")"),
                                            "text": body.strip()}, "critical")
    return _memory_line(body)


def _inferred_xid(code: int, what: str, body: str, gpu: str = "") -> Hit:
    """A driver message that states an Xid's condition without its number (as fell-off-the-bus does for 79)."""
    attrs = {"inferred_from": what, "detail": body.strip()[:300]} | xid_info(code)
    attrs["where"] = f" on {gpu}" if gpu else ""
    attrs["summary"] = f"the driver reported {what}, the condition of Xid {code} ({attrs['xid_meaning']}){attrs['where']}"
    return Hit("error", "Xid", attrs, attrs["xid_severity"], float(code))


def _nvswitch_line(body: str) -> Hit | None:
    """An NVSwitch (NVLink fabric) error: fatal ones take the fabric's links down, non-fatal ones are corrected."""
    m = _SXID.search(body)
    if m:
        fatal, code, pci, detail = m.group(3) == "Fatal", int(m.group(2)), m.group(1), m.group(4).strip()
        port = ""
    else:
        m = _FM_NVSWITCH.search(body)
        if not m:
            return None
        fatal, code, pci, detail = m.group(1) == "fatal", int(m.group(2)), m.group(3) or "", ""
        port = m.group(5) or ""
    where = f"NVSwitch {pci}" + (f" port {port}" if port else "")
    attrs = {"sxid": code, "fatal": fatal, "pci": pci, "port": port, "detail": detail or body.strip()[:300],
             "reported_by": "fabric manager" if "detected NVSwitch" in body else "nvidia-nvswitch driver",
             "summary": f"{'fatal' if fatal else 'non-fatal'} NVSwitch error (SXid {code}) on {where}"}
    return Hit("error", "NvSwitchError", attrs, "critical" if fatal else "warning", float(code))


def _xid_line(body: str) -> Hit | None:
    m = _XID.search(body)
    if m:
        rest = body[m.end():]
        attrs = {"pci": m.group(1)}
        p = _XID_PID.match(rest)
        if p:
            attrs["xid_pid"] = int(p.group(1)) if p.group(1).isdigit() else None
            attrs["process_name"] = (p.group(2) or "").strip()
            rest = rest[p.end():]
        attrs["detail"] = rest.strip()[:500]
        return _xid_hit(int(m.group(2)), attrs, body)
    m = _DEVICE_PLUGIN.search(body)
    if m:
        return _xid_hit(int(m.group(1)), {"gpu_uuid": m.group(2), "reported_by": "k8s-device-plugin",
                                          "detail": "the device plugin marked the GPU unhealthy"}, body)
    m = _PLUGIN_EVENT.search(body) if "Skipping" not in body else None
    if m and int(m.group(1)) > 0:
        return _xid_hit(int(m.group(1)), {"reported_by": "k8s-device-plugin (NVML event)", "detail": ""}, body)
    m = _DCGM_XID.search(body)
    if m:
        device = int(m.group(2)) if m.group(2) else -1
        hit = _xid_hit(int(m.group(1) or m.group(3)), {"device": device, "reported_by": "DCGM", "detail": ""}, body)
        if _DIAG_FAILED.search(body):
            # the diagnostic failed the GPU on this Xid: whatever the catalog says of the code alone
            # (45, a cleanup after earlier errors), the GPU did not pass its check
            hit.attrs["diag_failed"] = True
            hit.attrs["summary"] += ", and the DCGM diagnostic failed the GPU on it"
            return hit._replace(severity=_AT_LEAST_WARNING.get(hit.severity, hit.severity))
        return hit
    return None


def _xid_hit(code: int, attrs: dict, body: str) -> Hit:
    info = xid_info(code, attrs.get("detail", "") or body)
    attrs |= info
    attrs["detail"] = attrs.get("detail") or body.strip()[:300]
    attrs["where"] = _where(attrs)
    attrs["summary"] = f"the driver logged Xid {code} ({info['xid_meaning']}){attrs['where']}"
    return Hit("error", "Xid", attrs, info["xid_severity"], float(code))


def _where(attrs: dict) -> str:
    """" on GPU 0000:3b:00, process python3 (pid 42)": where the Xid happened, for explanations."""
    parts = []
    if attrs.get("pci"):
        parts.append(f"GPU {attrs['pci']}")
    elif attrs.get("gpu_uuid"):
        parts.append(attrs["gpu_uuid"])
    elif isinstance(attrs.get("device"), int) and attrs["device"] >= 0:
        parts.append(f"GPU {attrs['device']}")
    name, pid = attrs.get("process_name") or "", attrs.get("xid_pid")
    if name and name != "<unknown>":
        parts.append(f"process {name}" + (f" (pid {pid})" if pid else ""))
    return f" on {', '.join(parts)}" if parts else ""


def _fallen_off_bus(body: str) -> Hit:
    """The driver's fell-off-the-bus message without an Xid number: the same event as Xid 79."""
    m = _FALLEN_PCI.search(body)
    attrs = {"pci": m.group(1) if m else "", "inferred_from": "fallen off the bus",
             "detail": body.strip()[:300]} | xid_info(79)
    attrs["where"] = _where(attrs)
    return Hit("error", "Xid", attrs, "critical", 79.0)


def _memory_line(body: str) -> Hit | None:
    if "Uncorrectable" in body or "Pending Page" in body:
        hit = _smi_counter_line(body)
        if hit:
            return hit
    if "ECC" in body or "remap" in body or "retire" in body or "Remapping" in body:
        for rx, name, severity in _DCGM_MEMORY:
            m = rx.search(body)
            if m:
                numbers = [int(g) for g in m.groups() if g and g.isdigit()]
                who = "DCGM" if "Remapping Failure Occurred" not in body else "nvidia-smi -q"
                attrs: dict[str, object] = {"reported_by": who, "text": body.strip(),
                                            "summary": f'{who} reported "{body.strip()[:200]}"'}
                if numbers:
                    attrs["device"] = numbers[-1]
                return Hit("error", name, attrs, severity)
    if body.startswith("|"):
        m = _SMI_ROW.match(body)
        if m and int(m.group(4)) > 0:
            count = int(m.group(4))
            summary = (f"nvidia-smi shows {count} volatile uncorrectable ECC error(s) on GPU {m.group(1)} "
                       f"({m.group(2).strip()}, {m.group(3)})")
            return Hit("error", "EccUncorrectable", {"device": int(m.group(1)), "gpu_name": m.group(2).strip(),
                                                     "bus_id": m.group(3), "count": count, "summary": summary,
                                                     "reported_by": "nvidia-smi (Volatile Uncorr. ECC)"},
                       "critical", float(count))
    return None


# --- nvidia-smi -q memory sections and dcgmi diag tables pasted into a log -----------------------
# Some values only mean something under their header ("Pending : Yes" under "Remapped Rows", not
# under "MIG Mode"), so the log parser hands such sections over as one block (logs.blocks).
SMI_MEMORY_HEADERS = ("ECC Errors", "Retired Pages", "Remapped Rows", "Page Retirement")
# "SRAM Uncorrectable : 1", "Aggregate DRAM Uncorrectable : 2", "Pending Page Blacklist : Yes": these
# name what they count, so a grep of `nvidia-smi -q` is read line by line
_SMI_UNCORRECTABLE = re.compile(r"^\s{0,40}(?:Volatile |Aggregate )?(?:SRAM|DRAM|Device Memory|Register File|L1 Cache|"
                                r"L2 Cache|Texture Memory|Texture Shared|CBU) ?Uncorrectable(?: Parity| SEC-DED)?"
                                r"\s{0,60}:\s{0,8}(\d{1,12})\s{0,8}$")
_SMI_PENDING_PAGES = re.compile(r"^\s{0,40}Pending Page (?:Blacklist|Retirement)\s{0,60}:\s{0,8}Yes\s{0,8}$")
# "| Error | msg |" (dcgmi diag) or "| -> Memory system | Failure |" (dcgmi health): the message may
# continue on rows whose first cell is blank
_DCGM_ROW = re.compile(r"^\|\s?(?:(?:Error|Warning|Fail|Info)\b[^|]{0,40}\||[^|]{1,60}\|\s?(?:Fail|Failure|Warning|Error)\b)")
_DCGM_CONTINUATION = re.compile(r"^\|\s{2,60}\|")


def _smi_counter_line(body: str) -> Hit | None:
    m = _SMI_UNCORRECTABLE.match(body)
    if m and int(m.group(1)) > 0:
        key = body.split(":", 1)[0].strip()
        return Hit("error", "EccUncorrectable",
                   {"reported_by": "nvidia-smi -q", "counters": {key: int(m.group(1))}, "text": body.strip(),
                    "summary": f"nvidia-smi -q shows {key} = {m.group(1)}: uncorrectable memory errors on this GPU"},
                   "critical", float(m.group(1)))
    if _SMI_PENDING_PAGES.match(body):
        return Hit("error", "RetiredPagesPending", {"reported_by": "nvidia-smi -q", "text": body.strip(),
                                                    "summary": "nvidia-smi -q shows pages pending retirement"}, "error")
    return None


def smi_memory_header(body: str) -> int | None:
    """The indentation of an nvidia-smi -q memory section header ("    Remapped Rows"), else None."""
    if body.strip() in SMI_MEMORY_HEADERS:
        return len(body) - len(body.lstrip())
    return None


def smi_section_member(body: str, indent: int) -> bool:
    """A line of the open memory section: deeper than its header, or the next memory header."""
    if not body.strip() or len(body) > 200:
        return False
    deeper = len(body) - len(body.lstrip()) > indent and (":" in body or body.strip()[:1].isupper())
    return deeper or smi_memory_header(body) is not None


def smi_memory_event(bodies: list[str]) -> Hit | None:
    """ONE event for a pasted memory section, by what it shows (worst first): a failed row remap,
    uncorrectable ECC counters, a pending remap or page retirement, repairs made in the past."""
    values = _smi_values(bodies)
    remap = {k.split("/", 1)[1].lower(): v for k, v in values.items() if k.lower().startswith("remapped rows/")}
    unc = {k: n for k, v in values.items() if (n := _count(v)) and k.lower().startswith("ecc errors/")
           and ("uncorrectable" in k.lower() or "double bit" in k.lower())}
    retired = {k: n for k, v in values.items() if (n := _count(v)) and k.lower().startswith("retired pages/")
               and "bit" in k.lower()}
    pages_pending = any(_yes(v) for k, v in values.items() if "pending page" in k.lower())
    sram_exceeded = any(_yes(v) for k, v in values.items() if "threshold exceeded" in k.lower())
    attrs = {"reported_by": "nvidia-smi -q", "sections": values, "text": "\n".join(b.rstrip() for b in bodies)}
    rows_unc = _count(remap.get("uncorrectable error", "")) or 0
    if _yes(remap.get("remapping failure occurred", "")) or sram_exceeded:
        what = "row remapping failed" if not sram_exceeded else "the SRAM uncorrectable-error threshold was exceeded"
        return Hit("error", "RowRemapFailure", attrs | {"summary": f"nvidia-smi -q shows {what}: the memory can no "
                                                                   f"longer repair itself"}, "critical")
    if unc:
        counters = ", ".join(f"{k.split('/', 1)[1]} = {n}" for k, n in list(unc.items())[:6])
        return Hit("error", "EccUncorrectable", attrs | {"counters": unc, "summary": f"nvidia-smi -q shows "
                                                         f"uncorrectable ECC errors ({counters})"},
                   "critical", float(max(unc.values())))
    if _yes(remap.get("pending", "")):
        why = f" ({rows_unc} row(s) remapped after uncorrectable errors)" if rows_unc else ""
        return Hit("error", "RowRemapPending", attrs | {"summary": f"nvidia-smi -q shows a row remap pending{why}: "
                                                                   f"the repair takes effect at the next GPU reset"},
                   "warning")
    if pages_pending:
        return Hit("error", "RetiredPagesPending", attrs | {"summary": "nvidia-smi -q shows pages pending retirement"},
                   "error")
    if rows_unc or retired:
        return Hit("error", "RowRemapUncorrectable" if rows_unc else "RetiredPages",
                   attrs | {"summary": "nvidia-smi -q shows memory already repaired after uncorrectable errors "
                                       f"({rows_unc} remapped row(s), retired pages {retired or 0})"},
                   "warning", float(rows_unc or max(retired.values())))
    return None


def _smi_values(bodies: list[str]) -> dict[str, str]:
    """"Section/Sub/Key" -> value for indented `Key : Value` lines (the path follows indentation)."""
    out: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for body in bodies:
        text = body.expandtabs(4).rstrip()
        indent = len(text) - len(text.lstrip())
        key, colon, value = text.strip().partition(":")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "/".join([name for _, name in stack] + [key.strip()])
        if colon:
            out.setdefault(path, value.strip())
        else:
            stack.append((indent, key.strip()))
    return out


def _count(value: str) -> int | None:
    value = value.strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def _yes(value: str) -> bool:
    return value.strip().lower() == "yes"


def dcgm_row_start(body: str) -> bool:
    """A dcgmi diag result row whose message may wrap onto the following rows."""
    return body.startswith("|") and bool(_DCGM_ROW.match(body))


def dcgm_row_continues(body: str) -> bool:
    return body.startswith("|") and bool(_DCGM_CONTINUATION.match(body))


def dcgm_row_text(bodies: list[str]) -> str:
    """The message of a wrapped dcgmi diag row: the second cell of each row, joined as DCGM cut it
    (at a fixed width, mid-word or not), whitespace collapsed."""
    parts = []
    for body in bodies:
        cells = body.rstrip().split("|")
        if len(cells) >= 3:
            cell = "|".join(cells[2:-1]) if body.rstrip().endswith("|") else "|".join(cells[2:])
            parts.append(cell[1:-1] if body.rstrip().endswith("|") else cell[1:])
    return " ".join("".join(parts).split())

