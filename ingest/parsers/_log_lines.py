"""What one log line says, once its envelope is off: the known error and fact lines of
PyTorch c10d, NCCL, the CUDA runtime, the kernel driver, torch.compile, vLLM/SGLang,
Megatron/DeepSpeed and nccl-tests. `classify` returns None for anything else (the caller
keeps it as a plain `log` row).

Patterns are fixed (ours): Python `re` is fine here.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ingest.parsers._log_cuda import find_cuda_error
from ingest.parsers._log_oom import parse_oom


@dataclass
class Finding:
    kind: str
    name: str
    attrs: dict = field(default_factory=dict)
    severity: str = ""            # "" = keep the line's own level
    value: float = math.nan
    unit: str = ""


# --- PyTorch c10d / ProcessGroupNCCL -------------------------------------------------------
_WATCHDOG = re.compile(r"Watchdog caught collective operation timeout: WorkNCCL\((.*?)\) "
                       r"ran for (\d+) milliseconds before timing out")
_BLOCKING = re.compile(r"Work WorkNCCL\((.*?)\) timed out in blocking wait")
_WORK_FIELDS = {"seq": re.compile(r"SeqNum=(\d+)"), "op": re.compile(r"OpType=(\w+)"),
                "numel_in": re.compile(r"NumelIn=(-?\d+)"), "numel_out": re.compile(r"NumelOut=(-?\d+)"),
                "timeout_ms": re.compile(r"Timeout\(ms\)=(\d+)")}
_RANK_IN_MSG = re.compile(r"\[Rank (\d+)\]")
_PG_TAG = re.compile(r"\[PG (?:ID )?(\d+)(?: PG GUID (\d+)(?:\(([^)]*)\))?)? Rank (\d+)\]")
_PG_FAILURE = re.compile(
    r"(?:failure detected by watchdog at work sequence id: (\d+)|"
    r"Exception \(either an error or timeout\) detected by watchdog at work: (\d+)|"
    r"Timeout at NCCL work: (\d+))")
_LAST = {"last_enqueued": re.compile(r"last enqueued (?:NCCL )?work: (-?\d+)", re.I),
         "last_started": re.compile(r"last started (?:NCCL )?work: (-?\d+)", re.I),
         "last_completed": re.compile(r"last completed (?:NCCL )?work: (-?\d+)", re.I)}
_TERMINATE = re.compile(r"terminate called after throwing an instance of '([^']+)'")
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")

# --- NCCL transport / library ---------------------------------------------------------------
_IB_COMPLETION = re.compile(r"NET/IB ?: Got completion from peer (\S+?)(?:<(\d+)>)? with (?:status=|error )(\d+)"
                            r"(?:, opcode (\d+))?(?:, len (\d+))?(?:, vendor err (\d+))?")
_NETWORK_HINTS = ("ncclRemoteError", "remote process exited or there was a network error",
                  "Connection reset by peer", "Connection closed by remote peer", "Net : Connection closed", "ncclSystemError: System call (e.g. socket, malloc)")
_NCCL_ERROR = re.compile(r"\b(nccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument|"
                         r"InvalidUsage|RemoteError|InProgress))\b")
_NCCL_RESULT_CHAIN = re.compile(r"([\w/]+\.(?:cc|cu|h)):(\d+) -> (\d+)")
_NCCL_RESULTS = {0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
                 4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress"}

# --- kernel driver, serving engines, training loops -----------------------------------------
_XID = re.compile(r"NVRM: Xid \((PCI:[0-9a-fA-F:.]+)\): (\d+)(?:, pid=(\d+|'<unknown>'))?(?:, name=([^,]*))?,? ?(.*)")
_KV_CACHE = ("No available memory for the cache blocks", "larger than the available KV cache memory",
             "Not enough memory. Please try to increase --mem-fraction-static",
             "is larger than the maximum number of tokens that can be stored in KV cache")
_FACTS = [  # (name, pattern with named groups, kind)
    ("ModelWeightsLoaded", re.compile(r"Loading model weights took (?P<weights_gb>[\d.]+) GB"), "log"),
    ("KVCacheBlocks", re.compile(r"# GPU blocks: (?P<gpu_blocks>\d+), # CPU blocks: (?P<cpu_blocks>\d+)"), "log"),
    ("KVCacheSize", re.compile(r"GPU KV cache size: (?P<kv_cache_tokens>[\d,]+) tokens"), "log"),
    ("CudagraphCaptureStart", re.compile(r"Capturing (?:the model for )?CUDA graphs?|Capture cuda graph begin"), "log"),
    ("CudagraphCaptureEnd", re.compile(r"Graph capturing finished in (?P<seconds>[\d.]+) secs?|"
                                       r"Capture cuda graph end\. Time elapsed: (?P<elapsed_s>[\d.]+) s"), "log"),
    ("MemoryPoolEnd", re.compile(r"Memory pool end\. avail mem=(?P<avail_mem_gb>[\d.]+) GB"), "log"),
    ("ProcessExit", re.compile(r"(?:died, exit code: (?P<exit_code>-?\d+)|exits with return code = (?P<return_code>-?\d+))"), "log"),
    ("CheckpointSave", re.compile(r"saving checkpoint at iteration +(?P<iteration>\d+)"), "log"),
    ("CheckpointSaved", re.compile(r"successfully saved checkpoint at iteration +(?P<iteration>\d+)"), "log"),
    ("TensorRTCudaGraphFallback", re.compile(r"--useCudaGraph flag has been ignored|CUDA graph capture on the stream has failed"), "log"),
    ("FlightRecorderDisabled", re.compile(r"FlightRecorder is disabled"), "log"),
    ("FlightRecorderDump", re.compile(r"Finished writing Flight Recorder debug info to (?P<path>\S+)|"
                                      r"dumping nccl trace to (?P<dump_path>\S+)"), "log"),
]

# --- torch.compile / inductor ----------------------------------------------------------------
_CG_SKIP = re.compile(r"skipping cudagraphs due to (.*)")
_CG_PARTITIONS = re.compile(r"Created (\d+) graph partitions: (\d+) cudagraphable, (\d+) non-cudagraphable")
_CG_PARTITION = re.compile(r"Partition (\d+): (\d+) nodes, (non-cudagraphable|cudagraphable), "
                           r"inputs=(\d+), outputs=(\d+)")
_CG_OP = re.compile(r"(op\d+): reason=([^,]+), ir=([^,]+), fx=(.*)")

# --- Megatron / nccl-tests tables ------------------------------------------------------------
_ITERATION = re.compile(r"^\s*iteration\s+(\d+)/\s*(\d+) \|")
_MEGATRON_MEMORY = re.compile(r"memory \(MB\) \| allocated: ([\d.]+) \| max allocated: ([\d.]+) \| "
                              r"reserved: ([\d.]+) \| max reserved: ([\d.]+)")
_KEY_VALUE = re.compile(r"\s*([A-Za-z][\w ()/.-]*?):\s+(-?[\d.]+(?:E[+-]?\d+)?)\s*$", re.I)
_NCCL_TESTS_ROW = re.compile(
    r"^\s+(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(?:(-?\d+)\s+)?([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)"
    r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$")
_NCCL_TESTS_AVG = re.compile(r"^# Avg bus bandwidth\s*: ([\d.]+)")
_NCCL_TESTS_CONFIG = re.compile(r"^# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+)")
_NCCL_TESTS_DEVICE = re.compile(r"^#\s+Rank\s+(\d+) Group\s+\d+ Pid\s+(\d+) on\s+(\S+) device\s+(\d+) \[([^\]]+)\] (.+)$|"
                                r"^#\s+Rank\s+(\d+) Pid\s+(\d+) on\s+(\S+) device\s+(\d+) \[([^\]]+)\] (.+)$")


def classify(body: str) -> Finding | None:
    for check in (_oom, _nccl_watchdog, _nccl_network, _c10d_lines, _xid, _kv_cache, _cuda_error,
                  _compile, _facts, _tables, _nccl_info):
        found = check(body)
        if found:
            return found
    return None


def _oom(body: str) -> Finding | None:
    figures = parse_oom(body)
    if figures is None:
        return None
    m = re.match(r"^([\w.]*(?:Error|Exception))\b:?", body.strip())
    figures["exception"] = m.group(1) if m else ""
    return Finding("oom", "OutOfMemoryError", figures, "error",
                   float(figures["tried_to_allocate"]) if figures["tried_to_allocate"] is not None else math.nan,
                   "bytes")


def work_fields(work: str) -> dict:
    out = {}
    for key, rx in _WORK_FIELDS.items():
        m = rx.search(work)
        out[key] = (m.group(1) if key == "op" else int(m.group(1))) if m else None
    return out


def pg_fields(body: str) -> dict:
    m = _PG_TAG.search(body)
    if not m:
        return {}
    return {"pg_id": int(m.group(1)), "pg_guid": int(m.group(2)) if m.group(2) else None,
            "pg_name": m.group(3) or "", "pg_rank": int(m.group(4))}


def _nccl_watchdog(body: str) -> Finding | None:
    m = _WATCHDOG.search(body)
    if m:
        attrs = work_fields(m.group(1)) | {"elapsed_ms": int(m.group(2))} | pg_fields(body)
        r = _RANK_IN_MSG.search(body)
        attrs["rank_in_message"] = int(r.group(1)) if r else None
        attrs["restated"] = "terminated with exception" in body
        return Finding("error", "NCCLWatchdogTimeout", attrs, "", float(attrs["elapsed_ms"]), "ms")
    m = _BLOCKING.search(body)
    if m:
        return Finding("error", "NCCLBlockingWaitTimeout", work_fields(m.group(1)) | pg_fields(body))
    m = _PG_FAILURE.search(body)
    if m:
        seq = int(next(g for g in m.groups() if g))
        attrs = {"seq": seq, **pg_fields(body), **_last_counters(body)}
        attrs["signal"] = "timeout" if m.group(3) else "watchdog_failure"
        return Finding("error", "NCCLWatchdogFailure", attrs, "", float(seq))
    if "Received a dump signal" in body:
        return Finding("log", "NCCLDumpSignal", {**pg_fields(body), **_last_counters(body)})
    return None


def _last_counters(body: str) -> dict:
    out = {}
    for key, rx in _LAST.items():
        m = rx.search(body)
        if m:
            out[key] = int(m.group(1))
    return out


def _nccl_network(body: str) -> Finding | None:
    m = _IB_COMPLETION.search(body)
    hint = next((h for h in _NETWORK_HINTS if h in body), None)
    if not m and not hint:
        return None
    attrs: dict = {"transport": "IB" if m else ("socket" if "Socket" in body or "socket" in body else "")}
    if m:
        attrs.update(peer=m.group(1), peer_port=int(m.group(2)) if m.group(2) else None,
                     ib_status=int(m.group(3)), opcode=int(m.group(4)) if m.group(4) else None,
                     length=int(m.group(5)) if m.group(5) else None,
                     vendor_err=int(m.group(6)) if m.group(6) else None)
    e = _NCCL_ERROR.search(body)
    attrs["nccl_error"] = e.group(1) if e else ""
    v = _NCCL_VERSION.search(body)
    attrs["nccl_version"] = v.group(1) if v else ""
    attrs["process_teardown"] = "taking the entire process down" in body
    t = _TERMINATE.search(body)
    attrs["terminate_exception"] = t.group(1) if t else ""
    return Finding("error", "NCCLNetworkError", attrs, "error")


def _c10d_lines(body: str) -> Finding | None:
    if "Some NCCL operations have failed or timed out" in body:
        return Finding("error", "NCCLOperationsFailed", pg_fields(body) | _rank_attr(body))
    if "taking the entire process down" in body:
        return Finding("error", "NCCLProcessTeardown", pg_fields(body) | _rank_attr(body))
    if "watchdog thread terminated with exception" in body:
        return Finding("error", "NCCLWatchdogTerminated", pg_fields(body) | _rank_attr(body))
    m = _TERMINATE.search(body)
    if m:
        return Finding("error", "Terminate", {"exception": m.group(1)}, "critical")
    e = _NCCL_ERROR.search(body)
    if e and ("NCCL error" in body or "NCCL WARN" in body):
        return Finding("error", "NCCLError", {"nccl_error": e.group(1)})
    return None


def _rank_attr(body: str) -> dict:
    r = _RANK_IN_MSG.search(body)
    return {"rank_in_message": int(r.group(1))} if r else {}


def _xid(body: str) -> Finding | None:
    m = _XID.search(body)
    if not m:
        return None
    pid = m.group(3)
    attrs = {"pci": m.group(1), "xid": int(m.group(2)),
             "xid_pid": int(pid) if pid and pid.isdigit() else None,
             "process_name": (m.group(4) or "").strip(), "detail": m.group(5).strip()}
    return Finding("error", "Xid", attrs, "critical", float(attrs["xid"]))


def _kv_cache(body: str) -> Finding | None:
    hit = next((h for h in _KV_CACHE if h in body), None)
    return Finding("error", "KVCacheInsufficient", {"variant": hit}, "error") if hit else None


def _cuda_error(body: str) -> Finding | None:
    hit = find_cuda_error(body)
    if not hit:
        return None
    return Finding("error", hit[0], {"cuda_error": hit[0], "cuda_code": hit[1]}, "error", float(hit[1]))


def _compile(body: str) -> Finding | None:
    m = _CG_SKIP.search(body)
    if m:
        return Finding("log", "CudagraphsSkipped", {"reason": m.group(1).strip()}, "warning")
    m = _CG_PARTITIONS.search(body)
    if m:
        return Finding("log", "CudagraphPartitions", {"partitions": int(m.group(1)), "cudagraphable": int(m.group(2)),
                                                      "non_cudagraphable": int(m.group(3))}, "", float(m.group(3)))
    m = _CG_PARTITION.search(body)
    if m:
        return Finding("log", "CudagraphPartition", {"partition": int(m.group(1)), "nodes": int(m.group(2)),
                                                     "cudagraphable": m.group(3) == "cudagraphable",
                                                     "inputs": int(m.group(4)), "outputs": int(m.group(5))})
    m = _CG_OP.search(body)
    if m:
        return Finding("log", "NonCudagraphableOp", {"op": m.group(1), "reason": m.group(2).strip(),
                                                     "ir": m.group(3).strip(), "fx": m.group(4).strip()})
    return None


def _facts(body: str) -> Finding | None:
    for name, rx, kind in _FACTS:
        m = rx.search(body)
        if m:
            attrs = {k: _number(v) for k, v in m.groupdict().items() if v is not None}
            return Finding(kind, name, attrs)
    return None


def _tables(body: str) -> Finding | None:
    m = _ITERATION.match(body)
    if m:
        attrs = {"iteration": int(m.group(1)), "iterations_total": int(m.group(2))}
        for cell in body.split("|")[1:]:
            kv = _KEY_VALUE.match(cell)
            if kv:
                attrs[_snake(kv.group(1))] = _number(kv.group(2))
        ms = attrs.get("elapsed_time_per_iteration_ms", math.nan)
        return Finding("log", "TrainingIteration", attrs, "", float(ms), "ms")
    m = _MEGATRON_MEMORY.search(body)
    if m:
        return Finding("log", "TrainingMemory", {"allocated_mb": float(m.group(1)), "max_allocated_mb": float(m.group(2)),
                                                 "reserved_mb": float(m.group(3)), "max_reserved_mb": float(m.group(4))})
    m = _NCCL_TESTS_ROW.match(body)
    if m:
        g = m.groups()
        attrs = {"size_bytes": int(g[0]), "count": int(g[1]), "type": g[2], "redop": g[3],
                 "root": int(g[4]) if g[4] else None,
                 "out_of_place": {"time_us": float(g[5]), "algbw_gbs": float(g[6]), "busbw_gbs": float(g[7]), "wrong": g[8]},
                 "in_place": {"time_us": float(g[9]), "algbw_gbs": float(g[10]), "busbw_gbs": float(g[11]), "wrong": g[12]}}
        return Finding("sample", "nccl_tests.busbw", attrs, "", float(g[7]), "GB/s")
    m = _NCCL_TESTS_AVG.match(body)
    if m:
        return Finding("sample", "nccl_tests.avg_busbw", {"note": "averages latency-bound small sizes in"},
                       "", float(m.group(1)), "GB/s")
    m = _NCCL_TESTS_CONFIG.match(body)
    if m:
        return Finding("log", "NCCLTestsConfig", {"threads": int(m.group(1)), "gpus": int(m.group(2)),
                                                  "min_bytes": int(m.group(3)), "max_bytes": int(m.group(4)),
                                                  "validation": _after(body, "validation:")})
    m = _NCCL_TESTS_DEVICE.match(body)
    if m:
        g = [x for x in m.groups() if x is not None]
        return Finding("log", "NCCLTestsDevice", {"rank": int(g[0]), "test_pid": int(g[1]), "test_host": g[2],
                                                  "device": int(g[3]), "bus_id": g[4], "gpu": g[5].strip()})
    return None


def _nccl_info(body: str) -> Finding | None:
    m = _NCCL_RESULT_CHAIN.search(body)
    if m and body.rstrip().endswith(f"-> {m.group(3)}"):
        code = int(m.group(3))
        return Finding("log", "NCCLResultChain", {"site": f"{m.group(1)}:{m.group(2)}", "result_code": code,
                                                  "result": _NCCL_RESULTS.get(code, "")})
    return None


def _after(body: str, key: str):
    tail = body.split(key, 1)[1].split() if key in body else []
    return _number(tail[0]) if tail else None


def _snake(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower().replace("(ms)", "ms")).strip("_")


def _number(text: str):
    t = text.replace(",", "")
    try:
        return int(t)
    except ValueError:
        try:
            return float(t)
        except ValueError:
            return text
