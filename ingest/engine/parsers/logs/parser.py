"""Generic text logs: the fallback for any text file (last in the registry; never rejects text).

Each line loses its envelope (logs.prefix), then multi-line records are grouped
(logs.blocks: tracebacks -> ONE error/oom event, graph-break reports -> ONE GraphBreak, the
flight-recorder analyzer's verdict -> ONE FRMissingRanks, a burst of device-side assertion
lines across threads and ranks -> ONE cudaErrorAssert, a pasted `nvidia-smi -q` memory section or
a wrapped dcgmi table row -> ONE memory/Xid event),
and single lines are recognised (logs.lines: OOM messages, c10d watchdog, NCCL, CUDA
errors and kernel faults (logs.cuda), Xid / GPU lost / GPU memory errors (logs.gpu),
KV-cache sizing, torch.compile, training/nccl-tests tables). Everything else
stays a `log` row: attrs.text keeps the line, loc = "line N".

Time: every common prefix is read. Stamps without a year (glog, vLLM, syslog) take the
`year` argument, else the year logs.year finds (the file's own full dates, else its
modification time), and report.meta["clock"] says which; ingest.engine.align checks it.
Lines without a stamp inherit the previous line's time (attrs.ts_inherited); a file with
no stamp at all gets ts = 0 and clock domain "none" (the aligner places it).
Watchdog timeouts are held until the end so the PG status line that follows them
(last enqueued / completed) can be merged into the same row.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseReport
from ingest.engine.io import open_bytes
from ingest.engine.parsers import looks_binary
from ingest.engine.parsers.logs.blocks import (CHAINED, DcgmDiagRow, DeviceAsserts, FlightRecorderVerdict, GraphBreak, Line,
                                         SmiMemorySection, Traceback, starts_traceback)
from ingest.engine.parsers.logs.cuda import cuda_error_attrs, find_cuda_error
from ingest.engine.parsers.logs.dynamo import DynamoReport, unsupported_from_frames
from ingest.engine.parsers.logs.host import ProfilerTable
from ingest.engine.parsers.logs.kv_budget import engine_limits, judge_blocks
from ingest.engine.parsers.logs.lines import LineHit, classify
from ingest.engine.parsers.logs.c10d_aftermath import FRAME_ZERO, MAX_WRAP_LINES, continues, join
from ingest.engine.parsers.logs.c10d_aftermath import incomplete as record_incomplete
from ingest.engine.parsers.logs.nccl import API_SITES, RETRYING, TRANSPORT_SITES, C10Backtrace
from ingest.engine.parsers.logs.oom import TACTIC_SKIPPED, TRT_BUILD_FAILED, parse_oom
from ingest.engine.parsers.logs.prefix import split_line
from ingest.engine.parsers.logs.retried_oom import CALLER_TOLERATES, RETRY_NOTICE, HeldOOM
from ingest.engine.parsers.logs.year import YearHint, year_hint

FORMAT = "log"
SOURCE = "log"

MAX_LINE_CHARS = 64 * 1024
REPEAT_WINDOW = 20  # lines within which an identical error line is an echo, not a new error
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TORCH_LOG_TAGS = re.compile(r"^(?:\[(\d+/\d+)\]|\[(__\w+)\])(?: |$)")  # "$": a record's blank line
HEAD_LINES = 8
# structured captures that reach the text-log parser (no format parser claims them): (what, test of
# the first non-empty lines)
_CSV_HEADER = re.compile(r"^[A-Za-z_][\w .\[\]()%/-]{0,60}(?:, ?[A-Za-z_][\w .\[\]()%/-]{0,60}){2,40}$")
_STRUCTURED = (
    ("Prometheus exposition text (# HELP / # TYPE lines)",
     lambda head: any(l.startswith(("# HELP ", "# TYPE ")) for l in head)),
    ("`nvidia-smi nvlink` output", lambda head: any(re.match(r"^\s*Link \d{1,2}: ", l) for l in head)
     and any(l.startswith("GPU ") for l in head)),
    # dtrace prints "dtrace: script|description '...' matched N probe(s)" first, then its column header
    ("DTrace output", lambda head: any(re.match(r"^\s*CPU\s+ID\s+FUNCTION:NAME", l) for l in head[:4])
     or (bool(head) and re.match(r"^dtrace: (?:script|description) '.{0,200}' matched \d+ probes?$", head[0]) is not None)),
    ("a CSV table",
     lambda head: len(head) >= 2 and _CSV_HEADER.match(head[0]) is not None
     and all(l.count(",") == head[0].count(",") for l in head[1:4])),
)


def structured_guess(head: list[str]) -> str:
    return next((what for what, test in _STRUCTURED if test(head)), "")


_BFC_DUMP = re.compile(r"Summary of in-use Chunks by size:|Sum Total of in-use chunks: ")
_THREAD_HEADER = re.compile(r"^Exception in thread (.{1,120}?):$")  # Python's threading.excepthook


def sniff(head: bytes, name: str) -> bool:
    """Any text, including text with a few bad bytes (those lines are decoded with
    replacement and warned about); no NULs and almost no control characters."""
    sample = head[:4096]
    if not sample or b"\x00" in sample:
        return False
    if not looks_binary(sample):
        return True
    text = sample.decode("utf-8", errors="replace")
    odd = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in "\t\n\r\x0c\x1b"))
    return odd <= max(2, len(text) // 100)


def parse(path: Path, sink: EventSink, report: ParseReport, year: int | None = None) -> None:
    path = Path(path)
    hint = YearHint(year, "given") if year else year_hint(path)
    LogParser(sink, report, hint.year, hint.source).run(path)


_NCCL_THREAD = re.compile(r"\s*([\w.-]{1,120}):(\d{1,10}):(\d{1,10}) \[\d{1,4}\] ")
NCCL_IN_PROGRESS = 7  # ncclInProgress: a non-blocking communicator's call still running, not a failure


class LogParser:
    def __init__(self, sink: EventSink, report: ParseReport, year: int, year_source: str = ""):
        self.sink, self.report, self.year, self.year_source = sink, report, year, year_source
        self.last_ts = 0
        self.stamped = self.year_assumed = False
        self.block: (Traceback | GraphBreak | DynamoReport | FlightRecorderVerdict | DeviceAsserts | SmiMemorySection
                     | DcgmDiagRow | C10Backtrace | None) = None
        self.chained_after = ""            # loc of the traceback a chained one follows
        self.last_traceback_loc = ""
        self.thread = self.last_thread = ""  # "Exception in thread X:" names the next traceback's thread
        self.last_error = ("", "")           # (event name, message) of the last traceback
        self.timeouts: list[dict] = []      # NCCLWatchdogTimeout rows, emitted at the end
        self.pg_state: dict[tuple, dict] = {}
        self.recent_errors: dict[tuple, tuple[int, str]] = {}  # (name, body) -> (line no, loc)
        self.wrap: list[Line] = []          # an NCCL record cut by a terminal/logger wrap, still open
        self.tactic_oom: LineHit | None = None  # TensorRT skipped a tactic for want of memory
        self.held_net: tuple[list[Line], LineHit] | None = None  # a socket failure, until the next line
        self.held_oom: HeldOOM | None = None  # an OOM, until the program says it retries (logs.retried_oom)
        self.chains: dict[tuple, dict] = {}  # (host, pid, tid) -> NCCL "file.cc:N -> code" chain followed
        self.nccl_warns: dict[tuple, str] = {}  # (host, pid, tid) -> that thread's last NCCL WARN, cut
        self.ooms = 0                        # OOM events emitted
        self.kv_limits: tuple | None = None  # vLLM's (max_seq_len, block_size), to judge its KV blocks line
        self.bfc_dump: list[Line] | None = None  # TF/XLA's BFC allocator dump (printed when an allocation failed)
        self.head: list[str] = []            # the first non-empty lines, to say what a structured file looked like
        self.profiler = ProfilerTable()      # a pasted torch.profiler key_averages table (logs.host)
        self.held_stack: tuple[list[Line], LineHit] | None = None  # "Stack trace of the failed collective:", until its #0

    # --- reading ---------------------------------------------------------------------------
    def run(self, path: Path) -> None:
        with open_bytes(path) as f:
            for no, raw in enumerate(f, 1):
                self.feed(Line(no, self._decode(raw, no), None, 0))  # type: ignore[arg-type]
        self._release_net(retried=False)
        self._release_stack("")
        self._flush_wrap()
        self._close_block()
        self._flush_wrap()
        self._close_block()  # a record the last flush completed may have opened a block
        self._release_oom()
        self._bfc_dump_alone()
        self._say_if_structured()
        self._emit_timeouts()
        self.set_clock()

    def set_clock(self) -> None:
        """The clock of the whole file (ingest.engine.log_ranges calls it once for all its ranges)."""
        self.report.set_clock(
            Clock("unix", year_assumed=self.year if self.year_assumed else None,
                  year_source=self.year_source if self.year_assumed else "",
                  note="times as printed, read as UTC; stamps without a year use year_assumed "
                       "(from year_source); unstamped lines inherit the previous stamp")
            if self.stamped else Clock("none", note="no line carries a wall-clock time"))

    def _decode(self, raw: bytes, no: int) -> str:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            text = raw.decode("utf-8", errors="replace")
            self.report.warn(f"line {no}: invalid UTF-8 at column {e.start + 1}, replaced with U+FFFD")
        if len(text) > MAX_LINE_CHARS:
            self.report.warn(f"line {no}: {len(text):,} characters, cut to {MAX_LINE_CHARS:,}")
            text = text[:MAX_LINE_CHARS]
        return _ANSI.sub("", text.rstrip("\r\n"))

    def feed(self, line: Line) -> None:
        if len(self.head) < HEAD_LINES and line.text.strip():
            self.head.append(line.text.strip())
        p = split_line(line.text, self.year)
        while (m := _TORCH_LOG_TAGS.match(p.body)):
            line.frame_id = line.frame_id or (m.group(1) or "")
            line.tag = line.tag or (m.group(2) or "")
            p.body = p.body[m.end():]
        if p.ts is not None:
            self.last_ts, self.stamped = p.ts, True
            self.year_assumed |= p.year_assumed
        line.prefix, line.ts = p, self.last_ts
        if self.held_net is not None:
            self._release_net(retried=bool(RETRYING.search(p.body)))
        if self.held_stack is not None:
            frame = FRAME_ZERO.match(p.body)
            self._release_stack(frame.group(1) if frame else "")
        fallback = RETRY_NOTICE.search(p.body) or CALLER_TOLERATES.search(p.body)
        if self.held_oom is not None and (fallback or self.held_oom.expired(line.no)):
            self._release_oom(p.body if fallback else "")
        if self.wrap and self._continue_wrap(line):
            return
        if self.block is not None and self.block.offer(line):
            return
        if self.block is not None and record_incomplete(p.body):
            self.wrap = [line]  # a record wrapped mid-way: the open block may take it once it is whole
            return
        self._close_block()
        if GraphBreak.starts(line):
            self.block = GraphBreak([line])
        elif (report := DynamoReport.open(line)) is not None:
            self.block = report  # recompiles, explain() and CompileProfiler output (logs.dynamo)
        elif FlightRecorderVerdict.starts(line):
            self.block = FlightRecorderVerdict([line])
        elif (asserts := DeviceAsserts.open(line)) is not None:
            self.block = asserts  # one event for a burst of device-side assertion lines
        elif (section := SmiMemorySection.open(line) or DcgmDiagRow.open(line)) is not None:
            self.block = section  # nvidia-smi -q memory section / wrapped dcgmi diag row: read as a whole
        elif (backtrace := C10Backtrace.open(line)) is not None:
            self.block = backtrace  # a c10::Error stack printed without its message line
        elif starts_traceback(line):
            self.block = Traceback.start(line)
        else:
            self._single(line)

    # --- multi-line records ----------------------------------------------------------------
    def _close_block(self) -> None:
        block, self.block = self.block, None
        if isinstance(block, GraphBreak):
            self._emit(block.lines, LineHit("log", "GraphBreak", block.attrs()))
        elif isinstance(block, DynamoReport):
            name, attrs, value = block.event()
            self._emit(block.lines, LineHit("log", name, attrs, "", value))
        elif isinstance(block, FlightRecorderVerdict):
            self._emit(block.lines, LineHit(*block.event()[:2], block.attrs(), block.event()[2]))
        elif isinstance(block, DeviceAsserts):
            self._emit(block.lines, LineHit("error", "cudaErrorAssert", block.attrs(), "error", 710.0))
        elif isinstance(block, (SmiMemorySection, DcgmDiagRow)):
            hit = block.event()
            if hit is None:
                for line in block.lines:
                    self._single(line)
            else:
                self._emit(block.lines, LineHit(hit.kind, hit.name, hit.attrs, hit.severity, hit.value, hit.unit))
        elif isinstance(block, C10Backtrace):
            self._emit(block.lines, LineHit(*block.event(self._cuda_error_before(block.lines[0].no))))
        elif isinstance(block, Traceback):
            if block.is_traceback():
                self._emit_traceback(block)
            else:
                for line in block.lines:
                    self._single(line)

    def _emit_traceback(self, tb: Traceback) -> None:
        attrs = tb.attrs()
        text = tb.message_text
        finding = LineHit("error", tb.exception or "Traceback", attrs, "error")
        oom = parse_oom(text)
        cuda = find_cuda_error(text)
        if cuda and not (oom and cuda[0] == "cudaErrorMemoryAllocation"):  # an OOM by its CUDA name
            finding.name = cuda[0]
            attrs.update(cuda_error_attrs(cuda, text))
            finding.value = float(cuda[1])
        elif oom:
            finding = LineHit("oom", "OutOfMemoryError", attrs | oom, "error",
                              float(oom["tried_to_allocate"]) if oom["tried_to_allocate"] is not None else math.nan,
                              "bytes")
        else:
            # cut before its exception line: the last statement shown is what raised
            single = classify(text) if text.strip() or not tb.source else classify(tb.source[-1])
            if single and single.kind in ("error", "oom"):
                finding.name = single.name
                attrs.update({k: v for k, v in single.attrs.items() if k not in attrs})
            elif not tb.exception and (dynamo := unsupported_from_frames(tb.frames, tb.source)):
                finding.name = "DynamoUnsupported"  # cut before its exception line, raised by Dynamo itself
                attrs.update(dynamo)
        attrs = finding.attrs  # an OOM finding carries a copy
        if self.chained_after:
            attrs["chained_after"] = self.chained_after
            attrs["chained_after_error"], attrs["chained_after_message"] = self.last_error
            self.chained_after = ""
            self.thread = self.thread or self.last_thread  # a chained traceback is the same thread's
        if self.thread:
            attrs["thread"] = self.thread
        self.last_thread, self.thread = self.thread, ""
        self.last_error = (finding.name, str(attrs.get("message") or "")[:300])
        self.last_traceback_loc = _loc(tb.lines)
        self._emit(tb.lines, finding)

    # --- records wrapped over several lines -------------------------------------------------
    def _continue_wrap(self, line: Line) -> bool:
        """Join an unprefixed line to the open record it continues; else close that record."""
        p = line.prefix
        same_rank = p.rank is None or p.rank == self.wrap[0].prefix.rank  # torch prefixes each printed line
        continuation = p.ts is None and not p.severity and same_rank and not p.origin and p.body.strip()
        joined = join(self.wrap[0].prefix.body, p.body) if continuation else ""
        if not continuation or not continues(self.wrap[0].prefix.body, p.body, joined):
            self._flush_wrap()
            return False
        lines = self.wrap
        lines[0].prefix.body = joined
        lines.append(line)
        if len(lines) >= MAX_WRAP_LINES or not record_incomplete(lines[0].prefix.body):
            self._flush_wrap()
        return True

    def _flush_wrap(self) -> None:
        lines, self.wrap = self.wrap, []
        if not lines:
            return
        # the record whole again: it may go on the open block (a burst of device-side assertions
        # each wrapped before its " failed.") or open one; else it is a line of its own
        if self.block is not None and self.block.offer(lines[0]):
            return
        self._close_block()
        if (asserts := DeviceAsserts.open(lines[0])) is not None:
            self.block = asserts
            return
        self._single(lines[0], lines[1:])

    # --- single lines ----------------------------------------------------------------------
    def _single(self, line: Line, wrapped: list[Line] | None = None) -> None:
        if self.held_oom is not None and CALLER_TOLERATES.search(line.prefix.body):
            # a line that reached here from a buffered block, past feed's check, qualifies the held OOM
            self._release_oom(line.prefix.body)
        if wrapped is None and self.wrap and self._continue_wrap(line):
            return
        body = line.prefix.body
        if (warn := body.find("NCCL WARN ")) >= 0:
            # NCCL writes a WARN's site before its level ("h:1:2 [0] init.cc:943 NCCL WARN ..."): the
            # prefix reader keeps such a line whole, so its thread is read here
            p, m = line.prefix, _NCCL_THREAD.match(body)
            key = (m.group(1), int(m.group(2)), int(m.group(3))) if m else (p.host, p.pid, p.tid)
            self.nccl_warns[key] = body[warn + 10:warn + 310].strip()
        if wrapped is None and record_incomplete(body):
            self.wrap = [line]
            return
        lines = [line] + (wrapped or [])
        if (m := _THREAD_HEADER.match(body.strip())):
            self.thread = m.group(1)
        if body.strip() in CHAINED:
            self.chained_after = self.last_traceback_loc
            self._emit([line], LineHit("log", "ChainedException", {"after": self.last_traceback_loc}))
            return
        table = self.profiler.feed(body)
        finding = classify(body) or (LineHit(*table[:4], table[4], "%") if table else None) \
            or LineHit("log", _origin_name(line))
        finding = self._tensorrt_build(body, finding)
        if (limits := engine_limits(body)) is not None:
            self.kv_limits = limits
        if finding.name == "KVCacheBlocks" and "# " in body and self.kv_limits is not None:
            finding = judge_blocks(finding, self.kv_limits)
        if finding.name == "NCCLResultChain":
            finding = self._result_chain(line, finding)
        if finding.kind == "oom":
            self.ooms += 1
        elif self.bfc_dump is None and _BFC_DUMP.search(body):
            self.bfc_dump = [line]
        if finding.kind in ("error", "oom"):
            finding = self._unless_repeated(line, finding)
        if finding.name == "NCCLNetworkError" and finding.attrs.get("transport") == "socket" and wrapped is None:
            self._release_net(retried=False)
            self.held_net = (lines, finding)  # NCCL >= 2.24 says on the next line when it retries the connect
            return
        if finding.name == "NCCLWatchdogTimeout":
            self.timeouts.append(self._row(lines, finding))
            return
        if finding.name == "NCCLFailedCollectiveStack":
            self._release_stack("")
            self.held_stack = (lines, finding)  # its "#0 <op> from ..." frame follows
            return
        if finding.kind == "oom" and finding.severity != "warning":
            self._release_oom()
            self.held_oom = HeldOOM(lines, finding)  # until the program says whether it retries
            return
        if finding.name == "NCCLWatchdogFailure":
            pg_key = (_rank(line.prefix.rank, finding.attrs), finding.attrs["seq"])
            self.pg_state.setdefault(pg_key, {}).update(
                {k: v for k, v in finding.attrs.items() if k.startswith(("last_", "pg_"))})
        self._emit(lines, finding)

    def _tensorrt_build(self, body: str, finding: LineHit) -> LineHit:
        """TensorRT's builder retries with the next tactic when one cannot get its memory: a
        warning, until the build fails for want of any tactic; then that failure is the OOM."""
        if finding.kind == "oom" and TACTIC_SKIPPED.search(body):
            self.tactic_oom = finding
            return LineHit("log", "TensorRTTacticSkipped", dict(finding.attrs), "warning")
        if self.tactic_oom is not None and finding.kind != "oom" and TRT_BUILD_FAILED.search(body):
            oom, self.tactic_oom = self.tactic_oom, None
            attrs = dict(oom.attrs) | {"wording": "tensorrt", "framework": "tensorrt",
                                       "build_failure": body.strip()[:300]}
            return LineHit("oom", "OutOfMemoryError", attrs, "error", oom.value, oom.unit)
        return finding

    def _say_if_structured(self) -> None:
        """A file no format parser claimed is read here as plain text; when it looks like a
        structured capture that tracedoc does not read, the artifact says so (its values are
        only text to the rules)."""
        kind = structured_guess(self.head)
        if kind:
            self.report.warn(f"read as plain text: this looks like {kind}, which no parser reads as data; "
                             "its values are not used as figures")

    def _bfc_dump_alone(self) -> None:
        """TF/XLA's BFC allocator prints its chunk summary only when an allocation failed: a dump
        whose failure line the excerpt does not hold is still that out-of-memory."""
        if self.bfc_dump and not self.ooms:
            self._emit(self.bfc_dump[:1], LineHit("oom", "OutOfMemoryError", {
                "wording": "bfc_dump", "framework": "tensorflow/xla (BFC allocator)", "tried_to_allocate": None,
                "missing": ["tried_to_allocate", "total_capacity", "free", "allocated_by_pytorch",
                            "reserved_unallocated"],
                "detail": "the BFC allocator's dump of its chunks, which it prints when an allocation fails"},
                "error"))

    def _release_oom(self, retry_notice: str = "") -> None:
        held, self.held_oom = self.held_oom, None
        if held is not None:
            self._emit(held.lines, held.retried(retry_notice) if retry_notice else held.finding)

    def _release_stack(self, op: str) -> None:
        held, self.held_stack = self.held_stack, None
        if held is not None:
            lines, finding = held
            if op:
                finding.attrs.update(op=op, said=f"{finding.attrs['said']}: {op}")
            self._emit(lines, finding)

    def _release_net(self, retried: bool) -> None:
        if self.held_net is None:
            return
        lines, finding = self.held_net
        self.held_net = None
        if retried:  # the next line says NCCL retries this connect: a warning, not a failure (yet)
            finding = LineHit("log", "NCCLConnectRetried", finding.attrs, "warning")
        self._emit(lines, finding)

    def _result_chain(self, line: Line, finding: LineHit) -> LineHit:
        """Follow one thread's "file.cc:N -> code" lines: a code raised in NCCL's transport that
        reaches the API failed the communicator for a transport reason, WARN line or not."""
        p, a = line.prefix, finding.attrs
        key = (p.host, p.pid, p.tid)
        site, code = a["site"].rsplit(":", 1)[0], a["result_code"]
        chain = self.chains.get(key)
        if chain is not None and chain["done"] and chain["code"] == code and not TRANSPORT_SITES.search(site):
            return finding  # the rest of a failed call's trace, reported at its first API site
        if chain is None or chain["code"] != code or chain["done"]:
            if not code or code == NCCL_IN_PROGRESS:
                self.chains.pop(key, None)
                return finding
            self.chains[key] = chain = {"origin": a["site"], "code": code, "done": False}
        if not API_SITES.search(site):
            return finding
        chain["done"] = True
        origin = chain["origin"]
        if not TRANSPORT_SITES.search(origin.rsplit(":", 1)[0]):
            # raised elsewhere in NCCL (init's checks, the group, an argument): the call failed all the
            # same; the thread's last WARN says why ("Duplicate GPU detected : rank 2 and rank 0 ...")
            warn = self.nccl_warns.get(key, "")
            result = a["result"] or f"error {code}"
            return LineHit("error", "NCCLCallFailed", {
                "nccl_error": a["result"], "result_code": code, "origin": origin, "reached": a["site"],
                "message": f"{warn} ({result})" if warn else f"{result} raised in {origin}, returned to {a['site']}",
                "detail": f"{result} raised in {origin} and returned to {a['site']} (NCCL's own trace of the failed "
                          "call)" + (f"; its warning: {warn}" if warn else "")}, "error")
        transport = "IB" if re.search(r"net_ib|ibvwrap|ib_plugin", origin) else "socket" if "socket" in origin else (
            "bootstrap" if "bootstrap" in origin else "")
        return LineHit("error", "NCCLNetworkError", {
            "transport": transport, "nccl_error": a["result"], "origin": origin, "reached": a["site"],
            "detail": f"{a['result'] or f'error {code}'} raised in {origin} and returned to {a['site']} "
                      "(NCCL's own trace of the failed call)"}, "error")

    def _unless_repeated(self, line: Line, finding: LineHit) -> LineHit:
        """Tools print one error twice (raw, then through their logger): one event, and the
        echo kept as a `log` row pointing at it."""
        key = (finding.name, line.prefix.body.strip())
        seen = self.recent_errors.get(key)
        self.recent_errors = {k: v for k, v in self.recent_errors.items() if line.no - v[0] <= REPEAT_WINDOW}
        if seen and line.no - seen[0] <= REPEAT_WINDOW:
            return LineHit("log", finding.name, finding.attrs | {"repeat_of": seen[1]})
        self.recent_errors[key] = (line.no, f"line {line.no}")
        return finding

    def _cuda_error_before(self, no: int, within: int = 10) -> bool:
        """A CUDA-error line shortly before line `no`: the stack that follows is its own."""
        return any(name.startswith("cudaError") and 0 < no - seen <= within
                   for (name, _), (seen, _) in self.recent_errors.items())

    def _emit_timeouts(self) -> None:
        for row in self.timeouts:
            attrs = row["attrs"]
            state = self.pg_state.get((attrs["rank"], attrs["seq"]), {})
            for k, v in state.items():
                if attrs.get(k) is None:
                    attrs[k] = v
            attrs["pg"] = attrs.get("pg_name") or (str(attrs["pg_id"]) if attrs.get("pg_id") is not None else "")
            self.sink.emit(**row)
        self.timeouts = []

    # --- rows ------------------------------------------------------------------------------
    def _row(self, lines: list[Line], f: LineHit) -> dict:
        first = lines[0]
        p = first.prefix
        attrs = dict(f.attrs)
        attrs.setdefault("text", "\n".join(l.text for l in lines))
        if f.kind in ("error", "oom") or f.name.startswith("NCCL"):
            attrs.setdefault("rank", _rank(p.rank, attrs))
        if p.origin:
            attrs.setdefault("origin", p.origin)
        if first.tag:
            attrs.setdefault("log_tag", first.tag)
        if p.ts is None and self.stamped and first.ts:
            attrs["ts_inherited"] = True
        attrs.update({k: v for k, v in p.extra.items() if k not in attrs})
        severity = f.severity or p.severity or ("error" if f.kind in ("error", "oom") else "")
        return dict(ts=first.ts, kind=f.kind, name=f.name, host=p.host, pid=p.pid, tid=p.tid,
                    device=p.device if p.device >= 0 else _device(attrs), value=f.value, unit=f.unit,
                    severity=severity, attrs=attrs, loc=_loc(lines))

    def _emit(self, lines: list[Line], f: LineHit) -> None:
        self.sink.emit(**self._row(lines, f))


def _loc(lines: list[Line]) -> str:
    a, b = lines[0].no, lines[-1].no
    return f"line {a}" if a == b else f"line {a}-{b}"


def _rank(prefix_rank: int | None, attrs: dict) -> int | None:
    """Global rank: torch's [rankN]: prefix; else the rank the message names."""
    if prefix_rank is not None:
        return prefix_rank
    return attrs.get("rank_in_message")


def _device(attrs: dict) -> int:
    d = attrs.get("device")
    return d if isinstance(d, int) and d >= 0 else -1


def _origin_name(line: Line) -> str:
    origin = line.prefix.origin
    return origin.rsplit("/", 1)[-1].split(":", 1)[0] if origin else "log"
