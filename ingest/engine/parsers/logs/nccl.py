"""NCCL and c10d lines beyond the watchdog timeout itself: reports that ranks disagree on a
collective, NCCL RAS (`ncclras`) status reports, CUDA faults that surface through the NCCL
watchdog, and records a terminal or a logger wrapped over several lines.

Every classifier returns `(kind, name, attrs, severity)` or None, like logs.serving. Patterns
are fixed (ours) and anchored or bounded: no nested quantifiers over the untrusted line.
"""
from __future__ import annotations

import re

from dataclasses import dataclass, field

from ingest.engine.parsers.logs.cuda import CUDA_ERRORS, find_cuda_error

Hit = tuple[str, str, dict, str]

# --- ranks disagree on a collective ------------------------------------------------------------
# TORCH_DISTRIBUTED_DEBUG=DETAIL (ProcessGroupWrapper) checks every collective's fingerprint
_FINGERPRINT_MISMATCH = "Detected mismatch between collectives"  # "... on ranks." (a wrap may cut it)
_FP_SIDE = re.compile(r"Rank (\d{1,7}) is running (?:inconsistent )?collective:\s?CollectiveFingerPrint\(")
_FP_FIELDS = {"seq": re.compile(r"SequenceNumber=(\d{1,20})"), "op": re.compile(r"OpType=(\w{1,40})"),
              "shape": re.compile(r"TensorShape=\[([^\]]{0,400})\]"), "dtype": re.compile(r"TensorDtypes=(\w{1,40})")}
_FP_ASPECTS = (("Sequence number:", "sequence number"), ("Op type:", "op type"), ("shapes:", "shape"),
               ("dtypes:", "dtype"), ("devices:", "device"))
# NCCL's own checks: the COLL-log consistency check (2.4-2.7), and the transports that see a
# peer send more bytes than this rank posted for the same step
# (2.4: "Your program may be hanging, this may be caused by a collective mismatch around rank N")
_NCCL_MISMATCHED = re.compile(r"Mismatched collective detected(?:, please check your collective calls at and "
                              r"around rank (\d{1,7}))?|caused by a collective mismatch around rank (\d{1,7})")
_IB_MISMATCH = re.compile(r"NET/IB ?: (?:req \d+/\d+ tag \w+ peer (\S{1,80}) )?collective mismatch error,? "
                          r"local size (\d{1,20}) remote(?: size)? (\d{1,20})")
_SOCKET_TRUNCATED = re.compile(r"NET/Socket ?: (?:peer (\S{1,80}) )?message truncated ?:? ?"
                               r"(?:receiving (\d{1,20}) bytes instead of (\d{1,20}))?")

# A framework's own check that the ranks agree before it runs a collective (Horovod's coordinator,
# and any wording of the form): "Mismatched ALLREDUCE CPU/GPU device selection: One rank specified
# device GPU, but another rank specified device CPU", "Mismatched MPI operations: One rank did an
# allreduce, but another rank did an allgather", "mismatch in the collective ... across ranks".
_COLLECTIVE_WORD = (r"(?:ALL_?REDUCE|ALL_?GATHER(?:V)?|BROADCAST|ALL_?TO_?ALL(?:V)?|REDUCE_?SCATTER|REDUCE|GATHER|"
                    r"SCATTER|BARRIER|collective|MPI|NCCL|Horovod)")
_FRAMEWORK_MISMATCH = re.compile(r"\bMismatched (?P<what>[^:\n]{1,80}):\s?(?P<detail>[^\n]{0,400})|"
                                 r"\bmismatch(?:ed)? (?:in|of) (?P<what2>[^.\n]{0,60}?\bcollectives?\b[^.\n]{0,80})",
                                 re.I)
_TWO_SIDES = re.compile(r"One rank [^\n]{1,200}?, but another rank [^\n]{1,200}", re.I)
_DIFFERS = (("device", "device"), ("shape", "shape"), ("type", "dtype"), ("root", "root"), ("operation", "op type"),
            ("size", "size"), ("scale", "scale factors"))

# What a line must contain for collective_mismatch to match (the line prefilter's words, matched
# case-insensitively; logs.prefilter): keep in step with the patterns above.
MISMATCH_WORDS = ("detected mismatch between collectives", "mismatched collective", "collective mismatch",
                  "message truncated", "mismatched ", "mismatch in ", "mismatch of ")


def collective_mismatch(body: str) -> Hit | None:
    if _FINGERPRINT_MISMATCH in body:
        return "error", "CollectiveFingerprintMismatch", fingerprint_attrs(body), "critical"
    m = _NCCL_MISMATCHED.search(body)
    if m:
        around = m.group(1) or m.group(2)
        rank = int(around) if around else None
        return "error", "NCCLMismatchedCollective", {
            "around_rank": rank, "detail": "NCCL's consistency check saw ranks call different collectives"
            + (f" at and around rank {rank}" if rank is not None else "")}, "critical"
    m = _FRAMEWORK_MISMATCH.search(body)
    # a collective named, or two ranks set against each other: not any "mismatched" in a message
    if m and (m.group("what2") or _TWO_SIDES.search(m.group("detail") or "")
              or re.match(_COLLECTIVE_WORD + r"\b", m.group("what") or "", re.I)):
        return "error", "CollectiveMismatchReported", _framework_mismatch_attrs(m, body), "critical"
    m = _IB_MISMATCH.search(body)
    if m:  # the sender checks its message against the receive the peer posted
        return "error", "NCCLCollectiveSizeMismatch", _sizes("IB", m.group(1), m.group(2), m.group(3), "sends"), \
            "critical"
    m = _SOCKET_TRUNCATED.search(body)
    if m:  # the receiver checks the incoming message against its own posted receive
        return "error", "NCCLCollectiveSizeMismatch", _sizes("Socket", m.group(1), m.group(2), m.group(3),
                                                             "receives"), "critical"
    return None


def _framework_mismatch_attrs(m: re.Match, body: str) -> dict:
    """What the framework said the ranks disagree on, and both sides when it printed them."""
    what = (m.group("what") or m.group("what2") or "").strip()
    op = re.match(_COLLECTIVE_WORD, what, re.I) if m.group("what") else None
    sides = _TWO_SIDES.search(body)
    low = what.lower()
    differs = [name for word, name in _DIFFERS if word in low]
    detail = (f"mismatched {what}" if m.group("what") else f"mismatch in {what}") \
        + (f": {sides.group(0).rstrip('.')}" if sides else "")
    return {"op": op.group(0).upper() if op and op.group(0).upper() not in ("COLLECTIVE", "MPI", "NCCL", "HOROVOD")
            else None, "differs": differs, "differs_text": ", ".join(differs) or "not stated",
            "what": what[:120], "detail": detail[:400]}


def fingerprint_attrs(body: str) -> dict:
    """Both sides of a ProcessGroupWrapper report, and what differs between them."""
    starts = [(m.start(), int(m.group(1)), m.end()) for m in _FP_SIDE.finditer(body)][:2]
    sides = []
    for i, (_, rank, end) in enumerate(starts):
        stop = starts[i + 1][0] if i + 1 < len(starts) else len(body)
        seg = body[end:stop]
        found = {k: rx.search(seg) for k, rx in _FP_FIELDS.items()}
        sides.append({"rank": rank, **{k: m.group(1) if m else None for k, m in found.items()}})
    differs = _aspects(body) or _compare(sides)
    attrs: dict = {"ranks": [s["rank"] for s in sides], "sides": sides, "differs": differs,
                   "differs_text": ", ".join(differs) or "not stated"}
    for key in ("seq", "op", "shape", "dtype"):
        values = [s[key] for s in sides if s[key] is not None]
        attrs[key] = values[0] if values else None
    attrs["seq"] = int(attrs["seq"]) if attrs["seq"] is not None else None
    attrs["detail"] = "; ".join(
        f"rank {s['rank']} ran {s['op'] or '?'}" + (f" shape [{s['shape']}]" if s["shape"] is not None else "")
        + (f" {s['dtype']}" if s["dtype"] else "") + (f" (seq {s['seq']})" if s["seq"] is not None else "")
        for s in sides) or "the ranks' fingerprints are cut from this line"
    return attrs


def _aspects(body: str) -> list[str]:
    _, sep, tail = body.partition("Collectives differ in the following aspects:")
    return [name for key, name in _FP_ASPECTS if key in tail] if sep else []


def _compare(sides: list[dict]) -> list[str]:
    if len(sides) < 2:
        return []
    a, b = sides[0], sides[1]
    names = {"seq": "sequence number", "op": "op type", "shape": "shape", "dtype": "dtype"}
    return [names[k] for k in names if a[k] is not None and b[k] is not None and a[k] != b[k]]


def _sizes(transport: str, peer: str | None, message: str | None, posted: str | None, side: str) -> dict:
    """`message` bytes moved for a step where the receive side posted `posted` bytes."""
    size, room = (int(message) if message else None), (int(posted) if posted else None)
    if size is None or room is None:
        detail = "a message was larger than the receive posted for it (sizes cut from this line)"
    elif side == "sends":
        detail = f"this rank's {size:,}-byte message did not match the {room:,}-byte receive its peer posted"
    else:
        detail = f"this rank receives {size:,} bytes where it posted a {room:,}-byte receive"
    return {"transport": transport, "peer": peer or "", "message_bytes": size, "posted_bytes": room,
            "detail": detail}


# --- CUDA faults surfacing through the NCCL watchdog -----------------------------------------
_NCCL_CONTEXT = ("watchdog thread terminated with exception", "NCCL error", "ProcessGroupNCCL",
                 "unhandled cuda error", "ncclUnhandledCudaError")
_CUDA_ERROR_TEXT = re.compile(r"CUDA error: ([a-z][a-z0-9 ()/,'-]{3,120})")
_FAULT_MESSAGES = [(msg, (name, code)) for name, code, msg in CUDA_ERRORS]

CUDA_FAULT_WORDS = tuple(c.lower() for c in _NCCL_CONTEXT)   # the prefilter's words for cuda_fault_in_nccl


def cuda_fault_in_nccl(body: str) -> Hit | None:
    """The watchdog found the CUDA context broken (cudaEventQuery failed): the CUDA error is the
    cause and the NCCL failure its consequence. A message cut by a terminal wrap still names it."""
    if not any(c in body for c in _NCCL_CONTEXT):
        return None
    hit = find_cuda_error(body) or _cut_message(body)
    if not hit:
        return None
    name, code = hit
    return "error", name, {"cuda_error": name, "cuda_code": code, "surfaced_by": "nccl_watchdog"
                           if "watchdog" in body.lower() else "nccl"}, "error"


def _cut_message(body: str) -> tuple[str, int] | None:
    m = _CUDA_ERROR_TEXT.search(body)
    text = m.group(1).rstrip() if m else ""
    if len(text) < 8:
        return None
    return next((hit for msg, hit in _FAULT_MESSAGES if msg.startswith(text)), None)


# --- records wrapped over several lines ------------------------------------------------------
_COMPLETE = (
    ("Watchdog caught collective operation timeout", re.compile(r"milliseconds before timing out")),
    ("detected by watchdog at work", re.compile(r"last completed[\w ]{0,12}: ?-?\d+")),
    ("Exception (either an error or timeout) detected", re.compile(r"at work: ?\d+")),
    ("failure detected by watchdog", re.compile(r"last completed[\w ]{0,12}: ?-?\d+")),
    ("message truncated", re.compile(r"bytes instead of \d+")),
    ("This thread has been waiting for", re.compile(r"may be stuck")),       # XLA's rendezvous
    ("Termination timeout", re.compile(r"\d ?(?:seconds|s) exceeded")),
    ("Assertion `", re.compile(r"`\s{0,8}failed")),    # a device-side assertion before its " failed."
)


def record_incomplete(text: str) -> bool:
    """A known NCCL/c10d record whose required tail is not in `text` yet."""
    for start, tail in _COMPLETE:
        if start in text and not tail.search(text):
            return True
    if _oom_cut(text) or _torch_oom_cut(text):
        return True
    m = _CUDA_ERROR_TEXT.search(text) if "watchdog thread terminated" in text else None
    if m and not find_cuda_error(text) and _cut_message(text):
        return True
    return False


# XLA's out-of-memory status cut by a terminal or a logger before its size ("Resource exhausted: Out" /
# "of memory while trying to allocate 5520758552 bytes.")
_OOM_PHRASE = "Out of memory while trying to allocate"
_EXHAUSTED = re.compile(r"(?:[Rr]esource exhausted|RESOURCE_EXHAUSTED): ?([A-Za-z ]{0,40})$")


def _oom_cut(text: str) -> bool:
    if "xhausted" not in text[-80:] and "XHAUSTED" not in text[-80:]:
        return False
    m = _EXHAUSTED.search(text.rstrip())
    return m is not None and _OOM_PHRASE.startswith(m.group(1).strip()) and len(text) < 4096


# PyTorch's OOM message wrapped by a terminal or a logger before its figures close: the legacy
# parenthesis "(GPU 0; ... reserved in total by PyTorch)" / "... cached)", or 2.1+'s "GPU 0 has a
# total capacity of ... reserved by PyTorch but unallocated"
_TORCH_OOM_OPEN = re.compile(r"out of memory\. Tried to allocate [^\n]{0,40}?(?:\(GPU \d{1,3};|GPU \d{1,3} has a total)")
_TORCH_OOM_CLOSED = re.compile(r"(?:reserved in total by PyTorch|cached|free)\)|but unallocated")


def _torch_oom_cut(text: str) -> bool:
    if "Tried to allocate" not in text or len(text) > 4096:
        return False
    m = _TORCH_OOM_OPEN.search(text)
    return m is not None and not _TORCH_OOM_CLOSED.search(text, m.end())


# (the OOM figures' words with the space before them: "28.08 GiB reserved", never "GiBreserved")
_PHRASES = ("Out of memory while trying to allocate", " total capacity", " already allocated", " free;",
            " reserved in total by PyTorch", " is allocated by PyTorch", " is reserved by PyTorch but unallocated",
 "Watchdog caught collective operation timeout", "WorkNCCL(", "SeqNum=", "OpType=", "NumelIn=",
            "NumelOut=", "Timeout(ms)=", "milliseconds before timing out", "detected by watchdog at work",
            "last enqueued", "last completed", "message truncated", "bytes instead of", "CUDA error: ",
            "may be stuck", "seconds exceeded", "threads to join")


def join_wrapped(head: str, tail: str) -> str:
    """A terminal wraps mid-token (join as is); a logger wraps at a space it may drop: keep the
    join that restores more of the record's fixed phrases (ties: as is)."""
    tight = head + tail
    if head.endswith(" ") or tail.startswith(" "):
        return tight
    spaced = head + " " + tail
    score = (lambda text: (not record_incomplete(text), sum(p in text for p in _PHRASES)))
    return spaced if score(spaced) > score(tight) else tight


# --- NCCL RAS (ncclras, NCCL 2.24+) ----------------------------------------------------------
_RAS = (
    ("NCCLRasCommunicator", "log", re.compile(r"^#(?P<group>\d{1,6})-(?P<comm>\d{1,6}) \((?P<hash>[0-9a-f]{1,16})\) "
                                              r"(?P<status>[A-Z][A-Z,]{1,60})$")),
    ("NCCLRasMissingRanks", "error", re.compile(r"^ *Missing communicator data from (?P<count>\d{1,7}) "
                                                r"(?P<unit>rank|job process)")),
    ("NCCLRasDeadProcesses", "error", re.compile(r"^ *(?P<count>\d{1,7}) job process(?:es)? (?:is|are) "
                                                 r"considered dead")),
    # monitoring mode (2.29+): "[time] PEER_DEAD: Process 1524345 on node 172.16.64.245 managing GPU 1"
    ("NCCLRasDeadProcesses", "error", re.compile(r"^PEER_DEAD: Process (?P<pid>\d{1,10}) on node (?P<node>\S{1,80})")),
    # JSON output (2.28.7+, `ncclras -f json`): one key per line
    ("NCCLRasMissingRanks", "error", re.compile(r'^ *"missing_ranks_count": (?P<count>[1-9]\d{0,6}),?$')),
    ("NCCLRasCommunicator", "log", re.compile(r'^ *"hash": "0x(?P<hash>[0-9a-f]{1,16})",?$')),
    ("NCCLRasOpCountMismatch", "error", re.compile(r"^ *Communicator ranks have different (?:(?P<op>\w{1,30}) )?"
                                                   r"(?:collective )?operation counts")),
    ("NCCLRasStatusMismatch", "log", re.compile(r"^ *Communicator ranks have different status")),
    ("NCCLRasAsyncError", "error", re.compile(r"^ *(?P<kind>Asynchronous|Initialization) errors? on "
                                              r"(?P<count>\d{1,7}) ranks?")),
    ("NCCLRasOpCount", "log", re.compile(r"^ *(?P<count>\d{1,7}) ranks? ha(?:s|ve) launched up to operation "
                                         r"(?P<operation>\d{1,20})")),
    ("NCCLRasOpCount", "log", re.compile(r"^ *(?P<count>\d{1,7}) ranks? ha(?:s|ve) not launched any operations")),
    ("NCCLRasRank", "log", re.compile(r"^ *Rank (?P<rank>\d{1,7})(?: has launched up to operation "
                                      r"(?P<operation>\d{1,20}))?(?: has not launched any operations)?"
                                      r"(?: has status (?P<status>\w{1,20}))? -- (?:GPU (?P<gpu>\S{1,20}) managed by "
                                      r"process (?P<pid>\d{1,10}) on node (?P<node>\S{1,80})|\[process information)")),
    ("NCCLRasMissingRankList", "log", re.compile(r"^ *The missing ranks?: (?P<ranks>[\d, ]{1,400})$")),
    ("NCCLRasProcess", "log", re.compile(r"^ *Process (?P<pid>\d{1,10}) on node (?P<node>\S{1,80}) managing "
                                         r"GPUs? (?P<gpus>\S{1,80})")),
)

# The prefilter's words (case-insensitive) for ras_line, coll_line, comm_init, xla_rendezvous and
# horovod_stall below; RAS_STARTS for the communicator lines ("#0-1 (hash) OK"). Keep in step.
RAS_WORDS = ("missing communicator data from", "considered dead", "peer_dead: ", '"missing_ranks_count": ',
             '"hash": "0x', "communicator ranks have different", "asynchronous error", "initialization error",
             "launched up to operation", "not launched any operations", "managed by process", "[process information",
             "the missing rank", " managing gpu",
             ": opcount ", "init complete", "rendezvous", "termination timeout", "subset of ranks")
RAS_STARTS = "#"


def ras_line(body: str) -> Hit | None:
    """One line of an `ncclras` status report (text format)."""
    if len(body) > 600:
        return None
    for name, kind, rx in _RAS:
        m = rx.match(body)
        if m:
            attrs = {k: _int(v) for k, v in m.groupdict().items() if v is not None}
            if "ranks" in attrs:
                attrs["ranks"] = [int(x) for x in re.findall(r"\d+", str(attrs["ranks"]))]
            if name == "NCCLRasOpCount" and "operation" not in attrs:
                attrs["operation"] = 0
            return kind, name, attrs, ("warning" if kind == "error" else "")
    return None


def _int(v: str):
    return int(v) if v.isdigit() else v


# --- NCCL transport failures ----------------------------------------------------------------------
# ibv_wc_status of an IB completion error (verbs.h), with what it usually means for NCCL
IB_STATUS = {
    1: "IBV_WC_LOC_LEN_ERR", 2: "IBV_WC_LOC_QP_OP_ERR", 4: "IBV_WC_LOC_PROT_ERR (a local memory registration "
    "problem)", 5: "IBV_WC_WR_FLUSH_ERR (the queue pair was already in error: a consequence of an earlier failure)",
    9: "IBV_WC_REM_INV_REQ_ERR", 10: "IBV_WC_REM_ACCESS_ERR (the peer rejected the access)",
    11: "IBV_WC_REM_OP_ERR (the peer could not complete the operation)",
    12: "IBV_WC_RETRY_EXC_ERR (retries exhausted: the peer stopped acknowledging, its process died or the path "
    "to it failed)", 13: "IBV_WC_RNR_RETRY_EXC_ERR (the peer never posted a receive)",
}
# NCCL < 2.12 did not name the peer: "NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129"
_IB_COMPLETION = re.compile(r"NET/IB\w{0,8} ?: ?Got completion (?:from peer (\S{1,80}?)(?:<(\d{1,6})>)? )?with "
                            r"(?:status=|error )(\d{1,4})")
_IB_FIELDS = {"opcode": re.compile(r"opcode[= ](\d{1,10})"), "length": re.compile(r"\blen[= ](\d{1,12})"),
              "vendor_err": re.compile(r"vendor err (\d{1,6})")}
# (transport, pattern) of NCCL's own words for a link, socket or peer that failed; each starts
# with a literal, and its repetition is bounded
_TRANSPORT = (
    # "NET/IB : Got async event : port error"; newer NCCL names the port ("NET/IB : mlx5_0:1 Got async
    # event : ..."); NCCL 1 printed "IB Got async event : ..."
    ("IB", re.compile(r"(?:NET/(?:IB|DOCA)\w{0,8} ?: ?(?:[\w.-]{1,40}:\d{1,4} )?|\bIB )Got async (?:error )?event ?: ?"
                      r"([\w ]{1,60})")),
    ("IB", re.compile(r"\bibv_\w{1,40} (?:failed|error)[^\n]{0,80}")),
    ("socket", re.compile(r"\bsocket\w{0,24}: ?[^\n]{0,120}?(?:failed|Connection (?:reset|closed|refused|timed out)|"
                          r"exceeded (?:error )?retr)[^\n]{0,80}")),
    ("socket", re.compile(r"\bSocket (?:recv|send) failed[^\n]{0,80}")),
    # any warning NCCL's socket layer prints names its failure ("wrong type 4 != 3", "wrong magic"),
    # and NCCL <= 2.3 printed the failed call itself ("include/socket.h:185 WARN Call to connect failed")
    ("socket", re.compile(r"(?:misc/socket\.cc|include/socket\.h|socket\.h):\d{1,6}\]?[^\n]{0,80}?\bWARN [^\n]{1,200}")),
    ("socket", re.compile(r"\bWARN socket\w{1,30}\b[^\n]{0,200}")),
    ("socket", re.compile(r"\bCall to (?:connect|accept|bind|listen|recv|send|socket|poll) failed ?:? ?[^\n]{0,80}")),
    ("socket", re.compile(r"NET/Socket\w{0,8} ?: ?[^\n]{0,80}?(?:failed|error|Connection (?:reset|closed))[^\n]{0,80}")),
    ("OFI", re.compile(r"NET/OFI\b[^\n]{0,120}?(?:error|failed)[^\n]{0,80}")),
    ("bootstrap", re.compile(r"Bootstrap ?: ?(?:no socket interface found|[^\n]{0,80}?failed)[^\n]{0,80}")),
    ("", re.compile(r"remote process exited or there was a network error|\bncclRemoteError\b|"
                    r"Net : Connection closed[^\n]{0,80}|Connection closed by remote peer[^\n]{0,80}")),
    ("", re.compile(r"ncclSystemError: System call \(e\.g\. socket[^\n]{0,80}")),
    # ncclGetErrorString(ncclSystemError) as relayed by a wrapper (PyNCCL, c10d): "NCCL error: unhandled
    # system error (run with NCCL_DEBUG=INFO for details)", "NCCL error in: ...cpp:1191, unhandled system error"
    ("", re.compile(r"NCCL error\b[^\n]{0,300}?\bunhandled system error\b[^\n]{0,80}")),
)
# ibv_event_type_str() of the verbs async events that report a change of the fabric, not a failure
# (NCCL warns on every event but "communication established"; its fatal ones are the CQ/QP/SRQ
# errors, "local catastrophic error" and "port error")
_IB_BENIGN_EVENT = re.compile(r"(?:client reregistration|port active|LID change|P_Key change|SM change|GID table change|"
                              r"communication established|send queue drained|path migrated|SRQ limit reached|"
                              r"last WQE reached)\s*$", re.I)
RETRYING = re.compile(r"\bretrying\b|will retry|\bretry \d{1,4}/\d{1,4}")
_RETRYING = RETRYING

# NCCL traces a failed call up its stack with "file.cc:line -> code" INFO lines, WARN or not: a code
# raised in the transport (sockets, IB verbs, bootstrap) that reaches the API (init, group launch,
# enqueue) failed the communicator for a transport reason (logs.parser follows each thread's chain)
TRANSPORT_SITES = re.compile(r"(?:^|/)(?:socket|net_socket|net_ib|ibvwrap|bootstrap|net_ofi|p2p_plugin|ib_plugin|"
                             r"socket_plugin)\.(?:cc|cu|h|cpp)$")
API_SITES = re.compile(r"(?:^|/)(?:init|group|enqueue|collectives|comm)\.(?:cc|cu|cpp)$")
# a reset connection is NCCL's only when NCCL, c10d or their store said so (not an HTTP client)
_RESET = re.compile(r"Connection reset by peer")
_RESET_CONTEXT = re.compile(r"NCCL|nccl|socket|c10d|ProcessGroup|Dist\w{0,12}Error|store|[Bb]ootstrap|NET/")

# What a line must contain for transport_failure to match (the prefilter's words, case-insensitive)
TRANSPORT_WORDS = ("net/ib", "ibv_", "socket", "net/ofi", "bootstrap", "remote process exited", "ncclremoteerror",
                   "connection closed", "ncclsystemerror", "connection reset by peer", "call to ",
                   "unhandled system error", "got async event")


def transport_failure(body: str) -> dict | None:
    """What NCCL's transport said failed: the IB completion status, a socket call, an async port
    event, a peer that closed its connection; attrs.detail quotes it. None for anything else."""
    m = _IB_COMPLETION.search(body)
    if m:
        status = int(m.group(3))
        attrs: dict = {"transport": "IB", "peer": m.group(1), "peer_port": int(m.group(2)) if m.group(2) else None,
                       "ib_status": status, "ib_status_name": IB_STATUS.get(status, f"IB status {status}")}
        for key, rx in _IB_FIELDS.items():
            f = rx.search(body, m.end())
            attrs[key] = int(f.group(1)) if f else None
        source = f" from peer {m.group(1)}" if m.group(1) else ""
        attrs["detail"] = f"IB completion error{source}: status {status} {attrs['ib_status_name']}"
        return attrs
    for transport, rx in _TRANSPORT:
        m = rx.search(body)
        if m and _RETRYING.search(body):
            return None  # NCCL >= 2.24 logs each connect attempt it will retry; the last one warns
        if m and m.lastindex and _IB_BENIGN_EVENT.match(m.group(1).strip()):
            return None  # the fabric reconfigured (a port came up, the subnet manager re-registered clients)
        if m:
            return {"transport": transport or _guess_transport(body), "detail": m.group(0).strip(" '\".,;")[:240]}
    m = _RESET.search(body)
    if m and _RESET_CONTEXT.search(body):
        return {"transport": _guess_transport(body), "detail": body[max(0, m.start() - 120):m.end()].strip()}
    return None


def _guess_transport(body: str) -> str:
    # NCCL's words name no transport ("remote process exited or there was a network error"): its
    # network transport, whichever plugin it was, not an empty name in "NCCL's  transport failed"
    return "IB" if "NET/IB" in body else ("socket" if "ocket" in body else "network")


# --- per-call COLL lines (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL) --------------------------------
# "AllReduce: opCount 28c sendbuff 0x.. recvbuff 0x.. count 9984512 datatype 7 op 0 root 0
#  comm 0x55bef0201370 [nranks=4] stream 0x.."; opCount numbers the calls of one communicator
NCCL_DTYPES = {0: "int8", 1: "uint8", 2: "int32", 3: "uint32", 4: "int64", 5: "uint64", 6: "float16", 7: "float32",
               8: "float64", 9: "bfloat16", 10: "fp8e4m3", 11: "fp8e5m2"}
_COLL_OP = re.compile(r"([A-Z][A-Za-z]{1,29})$")
_COLL_FIELDS = re.compile(r"\b(opCount|sendbuff|recvbuff|count|datatype|op|root|comm|stream) ([\w()]{1,40})")
_NRANKS = re.compile(r"\[nranks=(\d{1,7})\]")
# another process's envelope printed into the same line (interleaved output)
_COLL_ENVELOPE = re.compile(r"([\w.-]{1,100}):(\d{1,10}):(\d{1,10}) \[(\d{1,4})\] NCCL INFO $")


def coll_line(body: str) -> Hit | None:
    at = body.find(": opCount ")
    if at < 0:
        return None
    op = _COLL_OP.search(body[max(0, at - 30):at])
    if not op:
        return None
    fields = dict(_COLL_FIELDS.findall(body[at:at + 600]))
    try:
        opcount = int(fields["opCount"], 16)
    except (KeyError, ValueError):
        return None
    attrs: dict = {"op": op.group(1), "opcount": opcount, "opcount_hex": fields["opCount"],
                   "count": _int_or_none(fields.get("count")), "datatype": _int_or_none(fields.get("datatype")),
                   "redop": _int_or_none(fields.get("op")), "root": _int_or_none(fields.get("root")),
                   "comm": fields.get("comm", ""), "stream": fields.get("stream", "")}
    attrs["dtype"] = NCCL_DTYPES.get(attrs["datatype"], str(attrs["datatype"]))
    n = _NRANKS.search(body, at)
    attrs["nranks"] = int(n.group(1)) if n else None
    env = _COLL_ENVELOPE.search(body[max(0, at - len(op.group(1)) - 140):at - len(op.group(1))])
    if env:
        attrs.update(coll_host=env.group(1), coll_pid=int(env.group(2)), coll_device=int(env.group(4)))
    return "log", "NCCLColl", attrs, ""


def _int_or_none(v: str | None) -> int | None:
    return int(v) if v is not None and v.lstrip("-").isdigit() else None


_COMM_INIT = re.compile(r"\bcomm (0x[0-9a-fA-F]{1,16}) rank (\d{1,7}) nranks (\d{1,7}) cudaDev (\d{1,4})")
_COMM_ID = re.compile(r"\bcommId (0x[0-9a-fA-F]{1,16})")


def comm_init(body: str) -> Hit | None:
    """"comm 0x.. rank R nranks N cudaDev D ... commId 0x.. - Init COMPLETE": which rank of which
    communicator a comm pointer is (the COLL lines name only the pointer)."""
    if "Init COMPLETE" not in body:
        return None
    m = _COMM_INIT.search(body)
    if not m:
        return None
    cid = _COMM_ID.search(body, m.end())
    return "log", "NCCLCommInit", {"comm": m.group(1), "comm_rank": int(m.group(2)), "nranks": int(m.group(3)),
                                   "cuda_dev": int(m.group(4)), "comm_id": cid.group(1) if cid else ""}, ""


# --- XLA's collective rendezvous (JAX, TensorFlow/XLA) -----------------------------------------------
# XLA's own watchdog: the local participants of a collective meet host-side before NCCL runs
# (wordings: "for `name` for N seconds and may be stuck. Expected N threads to join the rendezvous,
# but not all of them arrived on time." / older "for N seconds and may be stuck:"; the termination
# "Termination timeout [for `name`] of N seconds exceeded. Exiting ... [Expected N threads to join the
# rendezvous, but only M of them arrived on time.]" exits the process)
_XLA_STUCK = re.compile(r"This thread has been waiting for (?:`([^`]{1,400})` for )?(\d{1,6}) ?(?:seconds|s)\b"
                        r"[^\n]{0,20}?may be stuck")
_XLA_TERMINATED = re.compile(r"Termination timeout (?:for `([^`]{1,400})` )?of (\d{1,6}) ?(?:seconds|s) exceeded")
_XLA_EXPECTED = re.compile(r"Expected (\d{1,6}) threads to join the rendezvous(?:, but only (\d{1,6}) of them arrived)?")


def xla_rendezvous(body: str) -> Hit | None:
    if "rendezvous" not in body and "Termination timeout" not in body:
        return None
    expected = _XLA_EXPECTED.search(body)
    want = int(expected.group(1)) if expected else None
    arrived = int(expected.group(2)) if expected and expected.group(2) else None
    counts = {"expected": want, "arrived": arrived,
              "missing": want - arrived if want is not None and arrived is not None else None}  # arrived: want too
    m = _XLA_TERMINATED.search(body)
    if m:
        return "error", "XLARendezvousTimeout", {"rendezvous": (m.group(1) or "")[:200], "waited_s": int(m.group(2)),
                                                 **counts}, "critical"
    m = _XLA_STUCK.search(body)
    if m:
        return "error", "XLARendezvousStuck", {"rendezvous": (m.group(1) or "")[:200], "waited_s": int(m.group(2)),
                                               **counts}, "warning"
    return None


# Horovod's stall inspector: a collective some ranks submitted waits for the others
_HOROVOD_STALL = re.compile(r"submitted to be [\w, ]{1,60} by subset of ranks and are waiting for remainder of "
                            r"ranks for more than (\d{1,7}) seconds")


def horovod_stall(body: str) -> Hit | None:
    m = _HOROVOD_STALL.search(body) if "subset of ranks" in body else None
    return ("error", "HorovodStall", {"waited_s": int(m.group(1))}, "warning") if m else None


# c10d's store barrier at start-up: "Timed out after 1801 seconds waiting for clients. 3/4 clients joined."
# (2.2: "... waiting for workers. 1/2 workers joined."; <= 2.1: "Timed out initializing process group in store
# based barrier on rank: 2, for key: store_based_barrier_key:1 (world_size=8, worker_count=6, timeout=0:30:00)")
_STORE_BARRIER = re.compile(r"Timed out after (\d{1,7}) seconds waiting for (?:clients|workers)\. "
                            r"(\d{1,7})/(\d{1,7}) (?:clients|workers) joined")
_STORE_BARRIER_LEGACY = re.compile(r"store based barrier on rank:? ?(\d{1,7}), for key: \S{1,80} \(world_size=(\d{1,7}), "
                                   r"worker_count=(\d{1,7}), timeout=([\d:.]{1,20})\)")
# a serving engine's own hang detector on the forward batch (SGLang's scheduler watchdog)
_SERVING_WATCHDOG = re.compile(r"^Watchdog timeout \(self\.watchdog_timeout=(\d{1,7}(?:\.\d{1,3})?)\)")


# torch.distributed.monitored_barrier (and DETAIL's wrapper, which runs one before each collective):
# "Ranks 1, 3 failed to pass monitoredBarrier in 1800000 ms"; a rank that reached it but lost a peer:
# "Rank 1 successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0"
_MONITORED = re.compile(r"Ranks? ([\d, ]{1,400}?) failed to pass monitoredBarrier in (\d{1,10}) ms")
_MONITORED_PEER = re.compile(r"reached monitoredBarrier, but received errors while waiting for send/recv from "
                             r"rank (\d{1,7})")

# c10d's key-value store gave up waiting for another rank: a get or wait for a key a peer was to write
# (its ncclUniqueId, a barrier or broadcast key: the store answered, the peer never wrote), or a client
# that could not reach a store on its own machine (nothing in the way but the rank that hosts it)
_STORE_KEY_TIMEOUT = re.compile(r"Timeout waiting for key: ?(\S{1,160}) after (\d{1,10}) ?ms|"
                                r"[Ww]ait timeout after (\d{1,10}) ?ms, keys?: ?\[?'?([^\s',\]]{1,160})")
_STORE_CONNECT_TIMEOUT = re.compile(r"client socket has timed out after (\d{1,10}) ?(ms|s)\b[^\n]{0,40}?connect to "
                                    r"\(\[?([\w.:-]{1,80}?)\]?, ?(\d{1,5})\)")
_UNIQUE_ID_FROM = re.compile(r"ncclUniqueId from \[(\d{1,7})\]")
# torch <= 2.0: the store's blocking get ran out as "Socket Timeout" (the store answered nothing in time)
_STORE_GET_SOCKET_TIMEOUT = re.compile(r"store->get\('([^'\n]{1,80})'\) got error: Socket Timeout")
_LOOPBACK = re.compile(r"^(?:127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|localhost)$")
RANK_HANG_WORDS = ("monitoredbarrier", " joined", "store based barrier", "self.watchdog_timeout",  # prefilter words
                   "timeout waiting for key", "wait timeout after", "client socket has timed out",
                   "got error: socket timeout")


def rank_hang(body: str) -> Hit | None:
    """Hangs other tools detect: monitored barriers, c10d's start-up barrier, SGLang's scheduler watchdog."""
    m = _MONITORED.search(body) if "monitoredBarrier" in body else None
    if m:
        ranks = [int(r) for r in re.findall(r"\d+", m.group(1))]
        return "error", "MonitoredBarrierTimeout", {"missing_ranks": ranks, "timeout_ms": int(m.group(2)),
                                                    "culprit": ", ".join(map(str, ranks))}, "critical"
    m = _MONITORED_PEER.search(body) if "monitoredBarrier" in body else None
    if m:
        return "error", "MonitoredBarrierTimeout", {"missing_ranks": [int(m.group(1))], "timeout_ms": None,
                                                    "culprit": m.group(1), "peer_errored": True}, "critical"
    m = _STORE_BARRIER.search(body) if " joined" in body else None
    if m:
        joined, expected = int(m.group(2)), int(m.group(3))
        return "error", "StoreBarrierTimeout", {"waited_s": int(m.group(1)), "joined": joined, "expected": expected,
                                                "missing": expected - joined}, "error"
    m = _STORE_BARRIER_LEGACY.search(body) if "store based barrier" in body else None
    if m:
        expected, joined = int(m.group(2)), int(m.group(3))
        return "error", "StoreBarrierTimeout", {"rank": int(m.group(1)), "joined": joined, "expected": expected,
                                                "missing": expected - joined, "timeout": m.group(4)}, "error"
    hit = _store_wait(body)
    if hit:
        return hit
    m = _SERVING_WATCHDOG.match(body.lstrip())
    if m:
        return "error", "ServingWatchdogTimeout", {"timeout_s": float(m.group(1)), "engine": "sglang"}, "error"
    return None


def _store_wait(body: str) -> Hit | None:
    """A rank that waited at the c10d store for a peer that never came (StoreWaitTimeout): attrs.waited_s,
    the key or the store's address, the awaited rank where the words name it, and peer_missing: the store
    answered (a key timeout) or lives on this machine (a loopback connect), so no network is to blame."""
    m = _STORE_KEY_TIMEOUT.search(body) if "imeout" in body else None
    if m:
        key, ms = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
        awaited = _UNIQUE_ID_FROM.search(body)
        return "error", "StoreWaitTimeout", {
            "waited_s": int(ms) / 1000, "key": key, "awaited_rank": int(awaited.group(1)) if awaited else None,
            "what": f"the key {key}", "peer_missing": True}, "error"
    m = _STORE_GET_SOCKET_TIMEOUT.search(body) if "Socket Timeout" in body else None
    if m:
        awaited = _UNIQUE_ID_FROM.search(body)
        return "error", "StoreWaitTimeout", {
            "waited_s": None, "key": m.group(1), "awaited_rank": int(awaited.group(1)) if awaited else None,
            "what": f"the key {m.group(1)}", "peer_missing": True}, "error"
    m = _STORE_CONNECT_TIMEOUT.search(body) if "client socket" in body else None
    if m:
        waited = int(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
        host, port = m.group(3), int(m.group(4))
        return "error", "StoreWaitTimeout", {
            "waited_s": waited, "host": host, "port": port, "awaited_rank": None,
            "what": f"the store at {host}:{port} to accept", "peer_missing": bool(_LOOPBACK.match(host))}, "error"
    return None


# --- a c10::Error backtrace printed without its message ----------------------------------------------
# "Exception raised from F at FILE (most recent call first):" then "frame #N: ..." lines. Raised
# from c10_cuda_check_implementation inside the watchdog's event poll, it is a CUDA error of this
# GPU's context (a faulted kernel's sticky error) even when the "CUDA error: ..." line is cut off.
_C10_RAISED = re.compile(r"Exception raised from (\w{1,80}) at ")
_C10_FRAME = re.compile(r"^\s{0,8}frame #\d{1,4}: ")
_WATCHDOG_FRAMES = ("finishedGPUExecution", "WorkNCCL::isCompleted", "watchdogHandler", "ncclCommWatchdog",
                    "workCleanupLoop", "checkAndSetException")
MAX_BACKTRACE_LINES = 200


@dataclass
class C10Backtrace:
    lines: list = field(default_factory=list)
    raised_from: str = ""

    @staticmethod
    def open(line) -> "C10Backtrace | None":
        body = line.prefix.body
        m = _C10_RAISED.search(body) if "Exception raised from " in body else None
        if m is None and not _C10_FRAME.match(body):
            return None
        return C10Backtrace([line], m.group(1) if m else "")

    def offer(self, line) -> bool:
        if len(self.lines) >= MAX_BACKTRACE_LINES or not _C10_FRAME.match(line.prefix.body):
            return False
        self.lines.append(line)
        return True

    def event(self, cuda_error_just_before: bool) -> Hit:
        text = "\n".join(l.prefix.body for l in self.lines)
        watchdog = any(f in text for f in _WATCHDOG_FRAMES)
        attrs = {"raised_from": self.raised_from or "(not in excerpt)", "frames": text.count("frame #"),
                 "nccl_watchdog": watchdog}
        if watchdog and "c10_cuda_check_implementation" in text and not cuda_error_just_before:
            return "error", "CudaErrorInWatchdog", attrs | {
                "cuda_error": "", "surfaced_by": "nccl_watchdog", "error_label": "a CUDA error whose message is cut",
                "fault": "a sticky CUDA error (the message line is not in the excerpt)", "category": "kernel_fault",
                "detail": "the NCCL watchdog's CUDA event query failed (c10_cuda_check_implementation in "
                          "WorkNCCL::finishedGPUExecutionInternal)"}, "error"
        if "checkTimeout" in text:
            return "log", "NCCLTimeoutBacktrace", attrs, ""
        return "log", "C10Backtrace", attrs, ""
