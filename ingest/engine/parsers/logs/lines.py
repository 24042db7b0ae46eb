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

from contextlib import contextmanager
from typing import Callable, Iterator

from ingest.engine.parsers.logs.blocks import GENERIC_BREAK_HINT, break_hint
from ingest.engine.parsers.logs.c10d_aftermath import AFTERMATH_WORDS, timeout_aftermath
from ingest.engine.parsers.logs.cuda import CUDA_LINE_STARTS, CUDA_LINE_WORDS, classify_cuda_line, cuda_error_attrs
from ingest.engine.parsers.logs.gpu import GPU_LINE_STARTS, GPU_LINE_WORDS, classify_gpu_line
from ingest.engine.parsers.logs.host import HOST_WORDS, slow_callback
from ingest.engine.parsers.logs.nccl import (CUDA_FAULT_WORDS, MISMATCH_WORDS, RANK_HANG_WORDS, RAS_STARTS, RAS_WORDS,
                                      TRANSPORT_WORDS, coll_line, collective_mismatch, comm_init, cuda_fault_in_nccl,
                                      horovod_stall, rank_hang, ras_line, transport_failure, xla_rendezvous)
from ingest.engine.parsers.logs.oom import OOM_STARTS_AFTER_SPACE, OOM_WORDS, allocator_fact, parse_oom
from ingest.engine.parsers.logs.prefilter import KeywordGate, Needs
from ingest.engine.parsers.logs.serving import SERVING_WORDS, classify_serving


@dataclass
class LineHit:
    """What one recognised log line (or block) says: the event it becomes."""
    kind: str
    name: str
    attrs: dict = field(default_factory=dict)
    severity: str = ""            # "" = keep the line's own level
    value: float = math.nan
    unit: str = ""


# --- PyTorch c10d / ProcessGroupNCCL -------------------------------------------------------
# WorkNCCL; torch_npu's WorkHCCL and XPU's WorkXCCL print the same record
# "Watchdog caught"; blocking wait (and torch <= 1.9) raise "Caught collective operation timeout"
_WATCHDOG = re.compile(r"[Cc]aught collective operation timeout: Work[HNX]CCL\((.*?)\) "
                       r"ran for (\d+) milliseconds before timing out")
_BLOCKING = re.compile(r"Work Work[HNX]CCL\((.*?)\) timed out in (?:blocking wait|call to wait\(\))")
# the heartbeat monitor: the watchdog thread itself stopped making progress (a hung CUDA/NCCL call)
_HEARTBEAT = re.compile(r"watchdog got stuck for (\d+) seconds|Heartbeat monitor timed out|"
                        r"detected no heartbeat of its watchdog")
_WORK_FIELDS = {"seq": re.compile(r"SeqNum=(\d+)"), "op": re.compile(r"OpType=(\w+)"),
                "numel_in": re.compile(r"NumelIn=(-?\d+)"), "numel_out": re.compile(r"NumelOut=(-?\d+)"),
                "timeout_ms": re.compile(r"Timeout\(ms\)=(\d+)")}
_RANK_IN_MSG = re.compile(r"\[Rank (\d+)\]")
_PG_TAG = re.compile(r"\[PG (?:ID )?(\d+)(?: PG GUID (\d+))?(?: ?\(([^)]*)\))? Rank (\d+)\]")
_GLOBAL_RANK_IN_BODY = re.compile(r"\[rank(\d{1,7})\]:")  # torch's prefix, not at the line start
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
_NCCL_ERROR = re.compile(r"\b(nccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument|"
                         r"InvalidUsage|RemoteError|InProgress))\b")
# "misc/socket.cc:47 -> 3" (a result passed up the stack), optionally followed by the call: matched
# at the start of the message only, with bounded repetition (a long word-character line is linear)
_NCCL_RESULT_CHAIN = re.compile(r"([\w/.-]{1,200}\.(?:cc|cu|h|cpp)):(\d{1,6}) -> (\d{1,3})(?![\w])")
_NCCL_RESULTS = {0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
                 4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress"}

# --- kernel driver, serving engines, training loops -----------------------------------------
_FACTS = [  # (name, pattern with named groups, kind)
    ("ModelWeightsLoaded", re.compile(r"Loading model weights took (?P<weights_gb>[\d.]+) GB"), "log"),
    ("CudagraphCaptureStart", re.compile(r"Capturing (?:the model for )?(?:CUDA graphs?|cudagraphs?)\b|"
                                         r"Capture cuda graph begin"), "log"),
    ("CudagraphCaptureEnd", re.compile(r"Graph capturing finished in (?P<seconds>[\d.]+) secs?|"
                                       r"Capture cuda graph end\. Time elapsed: (?P<elapsed_s>[\d.]+) s"), "log"),
    ("MemoryPoolEnd", re.compile(r"Memory pool end\. avail mem=(?P<avail_mem_gb>[\d.]+) GB"), "log"),
    ("ProcessExit", re.compile(r"(?:died, exit code: (?P<exit_code>-?\d+)|exits with return code = (?P<return_code>-?\d+))"), "log"),
    # torch elastic (torchrun): "failed (exitcode: -9) local_rank: 3 (pid: 2966) of binary: ..."
    ("ProcessExit", re.compile(r"failed \(exitcode: (?P<exit_code>-?\d{1,4})\) local_rank: (?P<local_rank>\d{1,6})"), "log"),
    ("CheckpointSave", re.compile(r"saving checkpoint at iteration +(?P<iteration>\d+)"), "log"),
    ("CheckpointSaved", re.compile(r"successfully saved checkpoint at iteration +(?P<iteration>\d+)"), "log"),
    ("TensorRTCudaGraphFallback", re.compile(r"--useCudaGraph flag has been ignored|CUDA graph capture on the stream has failed"), "log"),
    ("FlightRecorderDisabled", re.compile(r"FlightRecorder is disabled"), "log"),
    ("FlightRecorderDump", re.compile(r"Finished writing Flight Recorder debug info to (?P<path>\S+)|"
                                      r"dumping nccl trace to (?P<dump_path>\S+)"), "log"),
]

# --- torch.compile / inductor ----------------------------------------------------------------
# "skipping cudagraphs due to X" (the 2.4+ text repeats the phrase), and cudagraph trees' own
# "skipping cudagraph due to function N exceeding max re-recording limit ..."
_CG_SKIP = re.compile(r"(?:skipping|disabling) cudagraphs? due to (.*)")
_CG_SKIP_REPEAT = ("skipping cudagraphs due to ", "disabling cudagraphs due to ")
# inductor re-records one graph per distinct input size ("CUDAGraph", "MUSAGraph", ... backends)
_CG_RERECORD = re.compile(r"observed (\d+) distinct sizes")
_CG_PARTITIONS = re.compile(r"Created (\d+) graph partitions: (\d+) cudagraphable, (\d+) non-cudagraphable")
_CG_PARTITION = re.compile(r"Partition (\d+): (\d+) nodes, (non-cudagraphable|cudagraphable), "
                           r"inputs=(\d+), outputs=(\d+)")
_CG_OP = re.compile(r"(op\d+): reason=([^,]+), ir=([^,]+), fx=(.*)")
# Dynamo names the code it resumes after a graph break "<graph break in f>" (2.0) or
# "torch_dynamo_resume_in_f_at_N" (2.1+); tracing one proves a break in f.
_RESUME = re.compile(r"<graph break in ([\w.<>]{1,200})>|torch_dynamo_resume_in_(\w{1,200}?)_at_(\d+)")
_RECOMPILE_ERROR = re.compile(r"(FailOnRecompileLimitHit|RecompileError|RecompileLimitExceeded)\b|"
                              r"(?:recompile_limit|cache_size_limit) reached with (?:fullgraph|one_graph)=True|"
                              r"Detected recompile when torch\.compile stance is 'fail_on_recompile'")
# pytest prints the exception line behind "E   "
# torch <= 2.1 tracebacks (and loggers that print the class's bare name) say "Unsupported: <reason>": Dynamo's
# own by the reasons its unimplemented() gives, which no other tool's "Unsupported:" starts with
_UNSUPPORTED = re.compile(r"^(?:E {1,8})?(?:torch\._dynamo\.exc\.(Unsupported|UncapturedHigherOrderOpError)|"
                          r"(Unsupported)(?=: (?:inline in skipfiles|call_function|call_method|generic_jump|"
                          r"dynamic shape operator|data dependent operator|torch\.\* op returned non-Tensor|"
                          r"builtin: |reconstruct: |missing: |Tensor\.(?:item|tolist|numpy)|skip function|"
                          r"hasattr|setattr|comparison |call_id|UserDefinedObjectVariable|.{0,80}Variable\())): (.{0,500})")

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


def classify(body: str) -> LineHit | None:
    """The first family (in _FAMILIES order) that recognises the line; only the families whose
    words the line contains are tried (logs.prefilter), which gives the same answer."""
    mask = _GATE.candidates(body) if _prefilter_on else _GATE.everything
    for bit, check in _CHECKS:
        if mask & bit:
            found = check(body)
            if found:
                return _with_cuda_detail(found, body)
    return None


@contextmanager
def prefilter_disabled() -> Iterator[None]:
    """Every family tried on every line: the baseline the benchmark and the tests compare with."""
    global _prefilter_on
    before, _prefilter_on = _prefilter_on, False
    try:
        yield
    finally:
        _prefilter_on = before


def _oom(body: str) -> LineHit | None:
    figures = parse_oom(body)
    if figures is None:
        fact = allocator_fact(body)  # an allocator's figures on a line of their own (logs.oom)
        return LineHit("log", "AllocatorStats", fact, "info") if fact else None
    m = re.match(r"^([\w.]*(?:Error|Exception))\b:?", body.strip())
    figures["exception"] = m.group(1) if m else ""
    return LineHit("oom", "OutOfMemoryError", figures, "error",
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


def _nccl_watchdog(body: str) -> LineHit | None:
    m = _WATCHDOG.search(body)
    if m:
        attrs = work_fields(m.group(1)) | {"elapsed_ms": int(m.group(2))} | pg_fields(body)
        attrs["rank_in_message"] = _message_rank(body)
        attrs["restated"] = "terminated with exception" in body
        return LineHit("error", "NCCLWatchdogTimeout", attrs, "", float(attrs["elapsed_ms"]), "ms")
    m = _BLOCKING.search(body)
    if m:
        return LineHit("error", "NCCLBlockingWaitTimeout", work_fields(m.group(1)) | pg_fields(body))
    m = _PG_FAILURE.search(body)
    if m:
        seq = int(next(g for g in m.groups() if g))
        attrs = {"seq": seq, **pg_fields(body), **_last_counters(body)}
        g = _GLOBAL_RANK_IN_BODY.search(body)
        if g:
            attrs["rank_in_message"] = int(g.group(1))
        attrs["signal"] = "timeout" if m.group(3) else "watchdog_failure"
        return LineHit("error", "NCCLWatchdogFailure", attrs, "", float(seq))
    m = _HEARTBEAT.search(body)
    if m:
        attrs = {**pg_fields(body), "stuck_s": int(m.group(1)) if m.group(1) else None, "signal": "heartbeat"}
        r = _message_rank(body)
        if r is not None:
            attrs["rank_in_message"] = r
        return LineHit("error", "NCCLWatchdogHung", attrs, "")
    if "Received a dump signal" in body or "dump signal from another rank" in body:
        return LineHit("log", "NCCLDumpSignal", {**pg_fields(body), **_last_counters(body)})
    return None


def _message_rank(body: str) -> int | None:
    """The global rank: torch's "[rankN]:" tag when it sits inside the line (after a progress
    bar or a colour code); else the "[Rank N]" the message names (cached once per process)."""
    r = _GLOBAL_RANK_IN_BODY.search(body) or _RANK_IN_MSG.search(body)
    return int(r.group(1)) if r else None


def _nccl_mismatch(body: str) -> LineHit | None:
    """Ranks disagree on a collective: DETAIL fingerprints, NCCL's own checks (logs.nccl)."""
    hit = collective_mismatch(body)
    return LineHit(*hit) if hit else None


def _rank_hang(body: str) -> LineHit | None:
    """Ranks that never arrived, as barriers and engine watchdogs report them (logs.nccl.rank_hang);
    ahead of the transport check: a barrier's "Original exception" often quotes a closed socket."""
    hit = rank_hang(body)
    return LineHit(*hit) if hit else None


def _nccl_cuda_fault(body: str) -> LineHit | None:
    """A CUDA error the NCCL watchdog (or an NCCL call) surfaced: the CUDA error is the event."""
    hit = cuda_fault_in_nccl(body)
    if not hit:
        return None
    finding = LineHit(*hit)
    finding.attrs.update(pg_fields(body))
    rank = _message_rank(body)
    if rank is not None:
        finding.attrs["rank_in_message"] = rank
    finding.value = float(finding.attrs["cuda_code"])
    return finding


def _nccl_ras(body: str) -> LineHit | None:
    """NCCL RAS reports, per-call COLL lines, communicator set-up, XLA's collective rendezvous,
    Horovod's stall inspector."""
    for parse in (ras_line, coll_line, comm_init, xla_rendezvous, horovod_stall):
        hit = parse(body)
        if hit:
            return LineHit(*hit)
    return None


def _last_counters(body: str) -> dict:
    out = {}
    for key, rx in _LAST.items():
        m = rx.search(body)
        if m:
            out[key] = int(m.group(1))
    return out


def _nccl_network(body: str) -> LineHit | None:
    """A transport that failed: IB completion errors and async events, socket calls, peers that
    closed their connection (logs.nccl.transport_failure)."""
    attrs = transport_failure(body)
    if attrs is None:
        return None
    e = _NCCL_ERROR.search(body)
    attrs["nccl_error"] = e.group(1) if e else ""
    v = _NCCL_VERSION.search(body)
    attrs["nccl_version"] = v.group(1) if v else ""
    attrs["process_teardown"] = "taking the entire process down" in body
    t = _TERMINATE.search(body)
    attrs["terminate_exception"] = t.group(1) if t else ""
    return LineHit("error", "NCCLNetworkError", attrs, "error")


def _c10d_lines(body: str) -> LineHit | None:
    if "Some NCCL operations have failed or timed out" in body:
        return LineHit("error", "NCCLOperationsFailed", pg_fields(body) | _rank_attr(body))
    if "taking the entire process down" in body:
        return LineHit("error", "NCCLProcessTeardown", pg_fields(body) | _rank_attr(body))
    if "watchdog thread terminated with exception" in body:
        return LineHit("error", "NCCLWatchdogTerminated", pg_fields(body) | _rank_attr(body))
    if "NCCL communicator was aborted" in body:  # torch <= 2.2 with no reason, or a caught abort
        return LineHit("error", "NCCLCommunicatorAborted", pg_fields(body) | _rank_attr(body))
    if "Starting to destroy process group" in body or "ProcessGroupNCCL destructor entered" in body:
        return LineHit("log", "NCCLProcessGroupDestroyed", _leaving_rank(body))
    m = _TERMINATE.search(body)
    if m:
        return LineHit("error", "Terminate", {"exception": m.group(1)}, "critical")
    e = _NCCL_ERROR.search(body)
    if e and ("NCCL error" in body or "NCCL WARN" in body):
        return LineHit("error", "NCCLError", {"nccl_error": e.group(1)})
    return None


def _leaving_rank(body: str) -> dict:
    """A rank shutting its process group down will join no later collective of it. Its global rank:
    the [rankN]: tag, else the group rank when the group is the default (world) group."""
    attrs = pg_fields(body)
    g = _GLOBAL_RANK_IN_BODY.search(body)
    if g:
        attrs["rank_in_message"] = int(g.group(1))
    elif attrs.get("pg_name") == "default_pg" or attrs.get("pg_id") == 0:
        attrs["rank_in_message"] = attrs.get("pg_rank")
    return attrs


def _rank_attr(body: str) -> dict:
    r = _RANK_IN_MSG.search(body)
    return {"rank_in_message": int(r.group(1))} if r else {}


def _xid(body: str) -> LineHit | None:
    """Xid events, a GPU fallen off the bus or lost, GPU memory-error reports (logs.gpu)."""
    hit = classify_gpu_line(body)
    return LineHit(*hit) if hit else None


def _kv_cache(body: str) -> LineHit | None:
    """KV-cache refusals, preemptions/retractions, sizing facts and stats (logs.serving)."""
    hit = classify_serving(body)
    return LineHit(*hit) if hit else None


def _cuda_fault(body: str) -> LineHit | None:
    """Kernel faults and uncorrectable ECC errors win over the wrappers that relay them (logs.cuda)."""
    hit = classify_cuda_line(body, faults_only=True)
    return LineHit(*hit) if hit else None


# CUDA's error log (CUDA_LOG_FILE, 12.9+): "[hh:mm:ss.mmm][thread id][CUDA][E] message"
_CUDA_ERROR_LOG = re.compile(r"^\[[\d:.]{5,20}\]\[(\d{1,20})\]\[CUDA\]\[[EWI]\] ")
_OTHER_THREAD = re.compile(r"\b(?:another|other|different|second) thread\b", re.I)
_CAPTURE_CALL = re.compile(r"\bfrom (cu[A-Z]\w{2,60}|cuda[A-Z]\w{2,60})\b")


def _capture_conflict(body: str) -> LineHit | None:
    """A capture broken by a call from another host thread, in the runtime's or a framework's
    words ("... conflicts with a stream capture sequence initiated from another thread"), and
    the CUDA error log's "Returning 900 (...) from cuMemHostAlloc" with the thread and call."""
    envelope = _CUDA_ERROR_LOG.match(body)
    thread = envelope.group(1) if envelope else ""
    if "captur" in body.lower() and _OTHER_THREAD.search(body) and \
            re.search(r"conflict|not permitted|invalidat|\[E\]|error|unsupported", body, re.I):
        return LineHit("error", "CaptureOtherThread", {"other_thread": True, "thread": thread,
                                                       "detail": body.strip()[:300]}, "error")
    hit = classify_cuda_line(body) if envelope else None
    if hit and hit.name.startswith("cudaErrorStreamCapture"):
        call = _CAPTURE_CALL.search(body)
        hit.attrs.update(thread=thread, call=call.group(1) if call else "")
        return LineHit(*hit)
    return None


# PyTorch's own refusals of a call made while the current stream is capturing (TORCH_CHECKs that
# print the capture status), e.g. "Cannot call CUDAGeneratorImpl::current_seed during CUDA graph
# capture", "Cannot copy between CPU and CUDA tensors during CUDA graph capture unless ..."
_FORBIDDEN_IN_CAPTURE = re.compile(r"\b(?:Cannot|cannot) (call|copy|use|record|query|synchronize|perform|run|access)"
                                   r" ([^\n]{1,160}?) (?:during|while|when) (?:a |the )?(?:CUDA ?[Gg]raph|stream)"
                                   r" (?:capture|is capturing)|"
                                   r"\b(\w{1,80}(?:\(\))?) is not (?:supported|allowed|permitted) (?:during|while|when) "
                                   r"(?:a |the )?(?:CUDA ?[Gg]raph|stream) (?:capture|capturing)|"
                                   r"cudaStreamCaptureStatus: cudaStreamCaptureStatusActive")


def _capture_forbidden(body: str) -> LineHit | None:
    """A call PyTorch refuses inside CUDA Graph capture: the captured code made it (its current
    stream is the capturing one), so it is a forbidden call in the captured region."""
    if "aptur" not in body:
        return None
    m = _FORBIDDEN_IN_CAPTURE.search(body)
    if not m:
        return None
    call = f"{m.group(1)} {m.group(2)}" if m.group(1) else (m.group(3) or "a call PyTorch does not allow")
    return LineHit("error", "CaptureForbiddenCall", {"call": call.strip()[:160], "detail": body.strip()[:300]}, "error")


def _cuda_error(body: str) -> LineHit | None:
    hit = classify_cuda_line(body)
    return LineHit(*hit) if hit else None


def _with_cuda_detail(found: LineHit, body: str) -> LineHit:
    """Every CUDA-error event carries the same attrs (label, kind of fault, who printed it),
    whichever classifier recognised it."""
    code = found.attrs.get("cuda_code")
    if "cuda_error" in found.attrs and "error_label" not in found.attrs and isinstance(code, int):
        found.attrs = cuda_error_attrs((found.attrs["cuda_error"], code), body) | found.attrs
    return found


def _compile(body: str) -> LineHit | None:
    m = _CG_SKIP.search(body)
    if m:
        reason = m.group(1).strip()
        while reason.startswith(_CG_SKIP_REPEAT):
            reason = reason.split(" due to ", 1)[1]
        return LineHit("log", "CudagraphsSkipped", {"reason": reason}, "warning")
    if "supports dynamic shapes by recording a new graph" in body:
        m = _CG_RERECORD.search(body)
        sizes = int(m.group(1)) if m else None
        return LineHit("log", "CudagraphRerecords", {
            "distinct_sizes": sizes, "summary": f"CUDA graphs were recorded again for {sizes or 'many'} distinct "
                                                "input sizes (one graph per shape)"}, "warning",
            float(sizes) if sizes else math.nan)
    m = _CG_PARTITIONS.search(body)
    if m:
        return LineHit("log", "CudagraphPartitions", {"partitions": int(m.group(1)), "cudagraphable": int(m.group(2)),
                                                      "non_cudagraphable": int(m.group(3)),
                                                      "reason": f"{m.group(3)} of {m.group(1)} graph partitions are "
                                                                "not cudagraphable"}, "", float(m.group(3)))
    m = _CG_PARTITION.search(body)
    if m:
        return LineHit("log", "CudagraphPartition", {"partition": int(m.group(1)), "nodes": int(m.group(2)),
                                                     "cudagraphable": m.group(3) == "cudagraphable",
                                                     "inputs": int(m.group(4)), "outputs": int(m.group(5))})
    m = _CG_OP.search(body)
    if m:
        return LineHit("log", "NonCudagraphableOp", {"op": m.group(1), "reason": m.group(2).strip(),
                                                     "ir": m.group(3).strip(), "fx": m.group(4).strip()})
    return _dynamo(body)


def _dynamo(body: str) -> LineHit | None:
    """One-line TorchDynamo evidence; its multi-line reports are blocks (logs.blocks, logs.dynamo)."""
    m = _RECOMPILE_ERROR.search(body)
    if m:
        return LineHit("error", "DynamoRecompileError", {"reason": body.strip()[:300],
                                                         "summary": f"compilation stopped: {body.strip()[:200]}"}, "error")
    m = _UNSUPPORTED.match(body.strip()) if "nsupported" in body or "UncapturedHigherOrderOpError" in body else None
    if m:
        reason = m.group(3).strip()
        return LineHit("error", "DynamoUnsupported", {"exception": m.group(1) or m.group(2), "reason": reason,
                                                      "hint": break_hint(reason),
                                                      "summary": f"fullgraph compile stopped at: {reason}"}, "error")
    m = _RESUME.search(body)
    if m:
        function = m.group(1) or m.group(2)
        return LineHit("log", "GraphBreakResume", {
            "function": function, "line": int(m.group(3)) if m.group(3) else None,
            "summary": f"Dynamo resumed tracing after a graph break in {function}", "hint": GENERIC_BREAK_HINT})
    return None


def _facts(body: str) -> LineHit | None:
    for name, rx, kind in _FACTS:
        m = rx.search(body)
        if m:
            attrs = {k: _number(v) for k, v in m.groupdict().items() if v is not None}
            return LineHit(kind, name, attrs)
    return None


def _tables(body: str) -> LineHit | None:
    m = _ITERATION.match(body)
    if m:
        attrs = {"iteration": int(m.group(1)), "iterations_total": int(m.group(2))}
        for cell in body.split("|")[1:]:
            kv = _KEY_VALUE.match(cell)
            if kv:
                attrs[_snake(kv.group(1))] = _number(kv.group(2))
        ms = attrs.get("elapsed_time_per_iteration_ms", math.nan)
        return LineHit("log", "TrainingIteration", attrs, "", float(ms), "ms")
    m = _MEGATRON_MEMORY.search(body)
    if m:
        return LineHit("log", "TrainingMemory", {"allocated_mb": float(m.group(1)), "max_allocated_mb": float(m.group(2)),
                                                 "reserved_mb": float(m.group(3)), "max_reserved_mb": float(m.group(4))})
    m = _NCCL_TESTS_ROW.match(body)
    if m:
        g = m.groups()
        row: dict[str, object] = {
            "size_bytes": int(g[0]), "count": int(g[1]), "type": g[2], "redop": g[3], "root": int(g[4]) if g[4] else None,
            "out_of_place": {"time_us": float(g[5]), "algbw_gbs": float(g[6]), "busbw_gbs": float(g[7]), "wrong": g[8]},
            "in_place": {"time_us": float(g[9]), "algbw_gbs": float(g[10]), "busbw_gbs": float(g[11]), "wrong": g[12]}}
        return LineHit("sample", "nccl_tests.busbw", row, "", float(g[7]), "GB/s")
    m = _NCCL_TESTS_AVG.match(body)
    if m:
        return LineHit("sample", "nccl_tests.avg_busbw", {"note": "averages latency-bound small sizes in"},
                       "", float(m.group(1)), "GB/s")
    m = _NCCL_TESTS_CONFIG.match(body)
    if m:
        return LineHit("log", "NCCLTestsConfig", {"threads": int(m.group(1)), "gpus": int(m.group(2)),
                                                  "min_bytes": int(m.group(3)), "max_bytes": int(m.group(4)),
                                                  "validation": _after(body, "validation:")})
    m = _NCCL_TESTS_DEVICE.match(body)
    if m:
        d = [x for x in m.groups() if x is not None]
        return LineHit("log", "NCCLTestsDevice", {"rank": int(d[0]), "test_pid": int(d[1]), "test_host": d[2],
                                                  "device": int(d[3]), "bus_id": d[4], "gpu": d[5].strip()})
    return None


def _nccl_info(body: str) -> LineHit | None:
    at = body.find("NCCL INFO ")  # a line whose envelope the prefix reader did not take off
    m = _NCCL_RESULT_CHAIN.match(body.lstrip(), 0) if at < 0 else _NCCL_RESULT_CHAIN.match(body, at + 10)
    if m:
        code = int(m.group(3))
        return LineHit("log", "NCCLResultChain", {"site": f"{m.group(1)}:{m.group(2)}", "result_code": code,
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


# --- a process that died: what a runtime prints as it goes down, whatever logger it bypasses ----
# the shell's notice of the signal that ended its child ("Killed": SIGKILL, the OOM killer's)
_SHELL_SIGNAL = (r"((?:Segmentation fault|Aborted|Bus error|Illegal instruction|Floating point exception|Killed)"
                 r"(?: \(core dumped\))?)")
_FATAL = (
    ("GoPanic", re.compile(r"^panic: (.{1,400})")),                                      # Go (ollama, k8s plugins)
    ("FatalError", re.compile(r"^(?:Fatal Python error|fatal error|FATAL ERROR): (.{1,400})")),
    ("ProcessCrashed", re.compile(r"^" + _SHELL_SIGNAL + r"\s*$")),
    # a script's job report: "job.sh: line 8: 21792 Killed                  python3 train.py"
    ("ProcessCrashed", re.compile(r"^\S{1,300}: line \d{1,7}: {0,8}\d{1,10} " + _SHELL_SIGNAL
                                  + r"(?: {1,60}\S[^\n]{0,400})?$")),
    ("ModelLoadFailed", re.compile(r"\berror loading model: (.{1,300})|\bfailed to load model\b(.{0,200})")),
    # an absl status opening its line: XLA logs a custom call's failure at W level as "Intercepted XLA
    # runtime error:" and the status on the next line ("INTERNAL: .../nccl_utils.cc:134: NCCL operation
    # ncclGetUniqueId(&id) failed: ...", "UNKNOWN: CUDNN_STATUS_NOT_SUPPORTED"); codes that mean a failure
    ("XlaStatusError", re.compile(r"^((?:INTERNAL|UNKNOWN|DATA_LOSS|ABORTED|UNAVAILABLE|FAILED_PRECONDITION): "
                                  r"\S.{7,500})$")),
    # torchelastic's failure record names the signal that killed a worker
    ("ProcessKilled", re.compile(r"\bSignal (\d{1,2} \(SIG[A-Z]{2,8}\)) received by PID \d{1,10}")),
)
_SEARCHED = ("ModelLoadFailed", "ProcessKilled")
# substrings of a lower-cased line; "aborted" also admits XLA's "ABORTED: " status
_FATAL_WORDS = ("panic: ", "fatal python error", "fatal error", "segmentation fault", "aborted",
                "bus error", "illegal instruction", "floating point exception", "killed", "error loading model",
                "failed to load model", ") received by pid", "internal: ", "unknown: ", "data_loss: ",
                "unavailable: ", "failed_precondition: ")


def _fatal(body: str) -> LineHit | None:
    """A process that died or gave up: Go's panic, a runtime's fatal error, the shell's crash notice,
    a model loader's final error. Rules that know the cause explain it; else the floor
    (rules.engine.features.failures) reports it."""
    text = body.strip()
    for name, rx in _FATAL:
        m = rx.search(text) if name in _SEARCHED else rx.match(text)
        if m:
            message = next((g for g in m.groups() if g), "") or text
            return LineHit("error", name, {"message": text[:500], "detail": message.strip()[:300]}, "error")
    return None


def _aftermath(body: str) -> LineHit | None:
    found = timeout_aftermath(body)
    return LineHit(*found) if found else None


def _host(body: str) -> LineHit | None:
    found = slow_callback(body)
    return LineHit(*found[:4], found[4]) if found else None  # type: ignore[misc]


# --- the families, in the order they are tried, with the words each needs --------------------
# A word list is a necessary condition of the family's patterns, compared case-insensitively
# (logs.prefilter); when a pattern changes, its words change with it.
_CUDA_NEEDS = Needs(CUDA_LINE_WORDS, starts=CUDA_LINE_STARTS)
_FAMILIES: tuple[tuple[Callable[[str], LineHit | None], Needs], ...] = (
    (_oom, Needs(OOM_WORDS, starts_after_space=OOM_STARTS_AFTER_SPACE)),
    (_nccl_mismatch, Needs(MISMATCH_WORDS)),
    (_nccl_watchdog, Needs(("collective operation timeout", "timed out in ", "detected by watchdog at work",
                            "timeout at nccl work", "watchdog got stuck", "heartbeat monitor timed out",
                            "no heartbeat", "dump signal"))),
    (_rank_hang, Needs(RANK_HANG_WORDS)),
    (_nccl_cuda_fault, Needs(CUDA_FAULT_WORDS)),
    (_cuda_fault, _CUDA_NEEDS),
    (_nccl_network, Needs(TRANSPORT_WORDS)),
    (_c10d_lines, Needs(("some nccl operations have failed", "taking the entire process down",
                         "watchdog thread terminated with exception", "nccl communicator was aborted",
                         "starting to destroy process group", "processgroupnccl destructor entered",
                         "terminate called after throwing", "nccl error", "nccl warn"))),
    (_xid, Needs(GPU_LINE_WORDS, starts=GPU_LINE_STARTS)),
    (_kv_cache, Needs(SERVING_WORDS)),
    (_capture_conflict, Needs(("captur", "][cuda]["))),
    (_capture_forbidden, Needs(("aptur",))),
    (_cuda_error, _CUDA_NEEDS),
    (_compile, Needs(("cudagraph", "supports dynamic shapes", "graph partitions", "partition ", "reason=",
                      "recompile", "cache_size_limit", "torch._dynamo.exc.", "<graph break in", "unsupported: ",
                      "torch_dynamo_resume_in_"))),
    (_aftermath, Needs(AFTERMATH_WORDS)),  # before _facts: its "FlightRecorder is disabled" ends a failed-stack line
    (_facts, Needs(("loading model weights took", "capturing ", "capture cuda graph", "graph capturing finished",
                    "memory pool end", "died, exit code", "exits with return code", "failed (exitcode:",
                    "checkpoint at iteration", "--usecudagraph flag", "cuda graph capture on the stream",
                    "flightrecorder is disabled", "flight recorder debug info", "dumping nccl trace"))),
    # Megatron tables; nccl-tests rows are indented numbers, its headers start with "#"
    (_tables, Needs(("iteration", "memory (mb)"), starts="#", first_space=True)),
    (_nccl_ras, Needs(RAS_WORDS, starts=RAS_STARTS)),
    (_nccl_info, Needs((" -> ",))),
    (_fatal, Needs(_FATAL_WORDS)),
    (_host, Needs(HOST_WORDS)),
)
_GATE = KeywordGate([needs for _, needs in _FAMILIES])
_CHECKS = tuple((1 << i, check) for i, (check, _) in enumerate(_FAMILIES))
_prefilter_on = True
