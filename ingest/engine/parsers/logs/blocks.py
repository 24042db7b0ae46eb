"""Multi-line records in text logs: Python tracebacks and torch.compile graph-break reports.

A traceback becomes ONE event: header, frames, source lines, the exception line and the
lines torch appends to a CUDA error message. Excerpts often start mid-traceback (at a
frame or at an indented source line) or stop before the exception line; both still group.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ingest.engine.parsers.logs.cuda import Hit, assert_summary, parse_device_assert
from ingest.engine.parsers.logs.gpu import (classify_gpu_line, dcgm_row_continues, dcgm_row_start, dcgm_row_text,
                                       smi_memory_event, smi_memory_header, smi_section_member)
from ingest.engine.parsers.logs.nccl import join_wrapped, record_incomplete
from ingest.engine.parsers.logs.prefix import Prefix

TRACEBACK_HEADER = "Traceback (most recent call last):"
CHAINED = ("During handling of the above exception, another exception occurred:",
           "The above exception was the direct cause of the following exception:")
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in (.+))?')  # pasted tracebacks lose the indent
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:::\w+)*)(?::\s?(.*))?$")
_EXCEPTION_SUFFIXES = ("Error", "Exception", "Exit", "Interrupt", "Failure", "Fault")
# a class raised from a package's errors/exceptions module is an exception whatever its name
# (triton.runtime.errors.OutOfResources, google.api_core.exceptions.NotFound, torch._dynamo.exc.Unsupported)
_EXCEPTION_MODULES = (".exc.", ".errors.", ".exceptions.", ".error.")
# exception classes whose name carries no suffix, wherever they are imported from: Triton's
# OutOfResources as triton.runtime.autotuner and triton 1.x's triton.code_gen re-export it
_EXCEPTION_NAMES = ("OutOfResources",)
# Lines torch (and the CUDA runtime) append to an exception message.
_MESSAGE_CONTINUATIONS = (
    "CUDA kernel errors might be asynchronously reported", "For debugging consider passing CUDA_LAUNCH_BLOCKING",
    "Compile with `TORCH_USE_CUDA_DSA`", "Search for `cuda", "Device-side assertions were explicitly omitted",
    "Exception raised from ", "frame #",
)
_GRAPH_BREAK_START = ("Graph break in user code at ", "Graph break: ", "Graph Break Reason:",
                      "Graph break (", "Graph break from ", "Graph break under ", "WON'T CONVERT ")
_GRAPH_BREAK_NEW = _GRAPH_BREAK_START[:2] + ("Graph break (", "Graph break under ", "WON'T CONVERT ")
_WONT_CONVERT = re.compile(r"^WON'T CONVERT (\S+) (\S+) line (\d+)")   # PyTorch 2.0/2.1: the whole frame runs eagerly
# PyTorch 2.0/2.1 logged through Python logging: "[2023-03-29 07:54:55,549] [0/1] torch._dynamo.x: [WARNING] ";
# a few characters glued in front (a unittest dot, a spinner) do not hide it.
_TORCH_PY_LOGGER = re.compile(r"^[^\[]{0,40}\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] (?:\[\d+/\d+\] )?"
                              r"((?:torch|torchdynamo)[\w.]{0,80}): \[(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\] ?")
# Lines of a graph-break report that carry no envelope of their own (multi-line records).
_GRAPH_BREAK_KEYS = ("Explanation:", "Hint:", "Reason:", "Graph Break Reason:", "User code traceback:",
                     "Developer debug context:", "For more details", "consider setting:", "or:", "to include these",
                     "torch._dynamo.config.capture_scalar_outputs", "env TORCHDYNAMO_", "due to:", "from user code:",
                     "Set torch._dynamo.config.verbose", "Set TORCH_LOGS=")
_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]{0,200}: ")   # "torch._dynamo.exc.Unsupported: generator"
# Dynamo's own exception ends the exc_info of a break record; its message is the reason even when
# the excerpt starts below the Traceback header (a record cut at its top, the tag still on each line)
_DYNAMO_EXC = re.compile(r"^torch\._dynamo\.exc\.\w{1,60}: ")


@dataclass
class Line:
    no: int
    text: str
    prefix: Prefix
    ts: int            # effective time (carried forward from the last stamped line)
    tag: str = ""      # torch._logging artifact, e.g. "__graph_breaks"
    frame_id: str = ""


def exception_name(body: str) -> tuple[str, str] | None:
    """(class, message) when the line reads like Python's final exception line."""
    m = _EXCEPTION.match(body)
    if not m:
        return None
    last = m.group(1).split(".")[-1].split("::")[-1]
    if not (last.endswith(_EXCEPTION_SUFFIXES) or last == "Error" or last in _EXCEPTION_NAMES
            or any(x in m.group(1) for x in _EXCEPTION_MODULES)):
        return None
    return m.group(1), (m.group(2) or "")


def starts_traceback(line: Line) -> bool:
    body = line.prefix.body
    if body.startswith(TRACEBACK_HEADER) or _FRAME.match(body):
        return True
    if body[:1] in (" ", "\t") and body.strip():
        return True  # tentative: an excerpt that starts at a source line
    return line.prefix.severity not in ("debug", "info", "warning") and exception_name(body) is not None \
        and ": " in body


# Frames and statements that run inside CUDA Graph capture: torch.cuda.graph / CUDAGraph,
# make_graphed_callables, inductor's cudagraph trees, vLLM's and SGLang's graph runners.
_CAPTURE_FILE = re.compile(r"(?:torch/cuda/graphs\.py|cudagraph_trees\.py|cuda_graph_runner\.py|"
                           r"compilation/cuda_graph\.py|cudagraph_utils\.py|cuda_piecewise_backend\.py)$")
_CAPTURE_FUNC = re.compile(r"^capture$|captur\w{0,100}graph|graph\w{0,100}captur|^capture_(?:model|begin|end|one_batch_size)$|"
                           r"make_graphed_callables", re.I)
_CAPTURE_SOURCE = re.compile(r"torch\.cuda\.graph\(|\.capture_(?:begin|end)\(|make_graphed_callables\(|"
                             r"CUDAGraph\(\)|capture_model\(|_capture_cudagraphs\(")


def capture_site(frames: list[dict], source: list[str]) -> str:
    """Where a traceback passes through CUDA Graph capture code ("file:line in func"), or ""."""
    for f in frames:
        path = f["file"].replace("\\", "/")
        if _CAPTURE_FILE.search(path) or _CAPTURE_FUNC.search(f["func"]):
            return f"{path.rsplit('/', 1)[-1]}:{f['line']} in {f['func']}"
    hit = next((s for s in source if _CAPTURE_SOURCE.search(s)), "")
    return hit[:200]


@dataclass
class Traceback:
    lines: list[Line]
    frames: list[dict] = field(default_factory=list)
    source: list[str] = field(default_factory=list)
    exception: str = ""
    message: list[str] = field(default_factory=list)
    header: bool = False
    state: str = "frames"  # frames -> message
    frame_indent: int = 1 << 30  # the least indentation of a "File ..." line

    @classmethod
    def start(cls, line: Line) -> "Traceback":
        tb = cls(lines=[])
        tb.offer(line)
        return tb

    def offer(self, line: Line) -> bool:
        body = line.prefix.body
        if self.state == "frames":
            if body.startswith(TRACEBACK_HEADER) and not self.lines:
                self.header = True
            elif (m := _FRAME.match(body)):
                self.frames.append({"file": m.group(1), "line": int(m.group(2)), "func": (m.group(3) or "").strip()})
                self.frame_indent = min(self.frame_indent, len(body) - len(body.lstrip()))
            elif self.frames and body[:1] in (" ", "\t") and len(body) - len(body.lstrip()) < self.frame_indent \
                    and ": " in body and (exc := exception_name(body.strip())) is not None:
                # a traceback quoted inside an indented record (torchelastic's failure summary): the
                # exception line sits left of the frames, as it does in a plain traceback
                self.exception = exc[0]
                self.message = [body.strip()]
                self.state = "message"
            elif body[:1] in (" ", "\t") and body.strip():
                if not self.frames and not self.header and GraphBreak.starts(line):
                    return False  # indented text, then a Dynamo explanation: not a traceback after all
                stripped = body.strip()
                if set(stripped) - set("^~ "):
                    self.source.append(stripped)
            elif (exc := exception_name(body)) is not None:
                self.exception = exc[0]
                self.message = [body]
                self.state = "message"
            else:
                return False
        elif body.startswith(_MESSAGE_CONTINUATIONS):
            self.message.append(body)
        elif self.message and body.strip() and line.prefix.ts is None and record_incomplete(self.message[-1]):
            # the exception's record wrapped by a terminal or a logger before its fixed tail
            # (PyTorch's OOM figures): one line again, so its fields read as printed
            self.message[-1] = join_wrapped(self.message[-1], body.strip())
        else:
            return False
        self.lines.append(line)
        return True

    def is_traceback(self) -> bool:
        """An indented run with neither frames nor an exception was just indented text."""
        return self.header or bool(self.frames) or bool(self.exception)

    @property
    def message_text(self) -> str:
        return "\n".join(self.message)

    def attrs(self) -> dict:
        first_message = self.message[0] if self.message else ""
        site = capture_site(self.frames, self.source)
        cls_prefix = f"{self.exception}:" if self.exception else ""
        return {
            "text": "\n".join(l.text for l in self.lines),
            "message": first_message,
            "exception_message": first_message[len(cls_prefix):].strip() if cls_prefix else first_message,
            "exception": self.exception,
            "frames": self.frames,
            "raising_statement": self.source[-1] if self.source else "",
            "truncated": not self.exception or not self.header,
            "during_cuda_graph_capture": bool(site) or "capture" in first_message.lower(),
            "capture_site": site,
        }


# What to do about a graph break, keyed on words of its reason (the log's own Hint wins).
_BREAK_HINTS = (
    (("item()", "Tensor.item", "tolist", "capture_scalar_outputs"),
     "keep the scalar on the GPU, or set torch._dynamo.config.capture_scalar_outputs = True"),
    (("nonzero", "dynamic output shape", "capture_dynamic_output_shape_ops"),
     "set torch._dynamo.config.capture_dynamic_output_shape_ops = True or give the op a static shape"),
    (("generic_jump", "Data-dependent branching", "data-dependent", "jump"),
     "replace the Python branch on a tensor value with torch.where or torch.cond"),
    (("print", "logging", "logger"), "move print()/logging out of the compiled region"),
    (("graph_break",), "remove the explicit torch._dynamo.graph_break() call"),
    (("hasattr", "getattr", "UserDefinedClassVariable"),
     "read the attribute outside the compiled function and pass the value in"),
)
GENERIC_BREAK_HINT = ("move the unsupported Python out of the compiled function (or wrap it in "
                      "torch.compiler.disable) and re-check with fullgraph=True")


def break_hint(reason: str) -> str:
    low = reason.lower()
    return next((hint for words, hint in _BREAK_HINTS if any(w.lower() in low for w in words)), GENERIC_BREAK_HINT)


def dynamo_message(line: Line) -> str:
    """The message of a torch._dynamo log line, also under PyTorch 2.0/2.1's Python-logging header."""
    body = line.prefix.body
    m = _TORCH_PY_LOGGER.match(body)
    return body[m.end():] if m else body


def artifact(line: Line) -> str:
    """The torch._logging artifact that wrote the line ("__graph_breaks", "__recompiles"): the
    glog tag, or the last part of the 2.0/2.1 logger name ("torch._dynamo.x.__graph_breaks")."""
    if line.tag:
        return line.tag
    m = _TORCH_PY_LOGGER.match(line.prefix.body)
    last = m.group(1).rsplit(".", 1)[-1] if m else ""
    return last if last.startswith("__") else ""


def has_envelope(line: Line) -> bool:
    """The logger stamped this line (time, origin, pid or torch tags): its neighbours can be matched on it."""
    p = line.prefix
    return p.ts is not None or bool(p.origin) or p.pid >= 0 or bool(line.tag or line.frame_id)


@dataclass
class GraphBreak:
    """torch._logging prints one graph-break report as several lines with one header. Older
    versions (2.0-2.4) print "Graph break: <reason> from user code at:" or "Graph break from
    `Tensor.item()`" followed by the user frames, often without any envelope of their own."""
    lines: list[Line]

    @staticmethod
    def starts(line: Line) -> bool:
        message = dynamo_message(line)
        if message.startswith(_GRAPH_BREAK_START) or artifact(line) == "__graph_breaks":
            return True  # the artifact tag names the record even when the excerpt starts mid-record
        # PyTorch 2.7+ Unsupported text relayed by an application's own error message: its header
        # line is the app's, the Dynamo report starts at the indented explanation.
        s = message.strip()
        return (s.startswith("Explanation:") and ("Dynamo" in s or "graph break" in s)) or \
            s.startswith("For more details about this graph break")

    def offer(self, line: Line) -> bool:
        first = self.lines[0]
        message = dynamo_message(line)
        if message.startswith(_GRAPH_BREAK_NEW) and not self._item_warning_continues(message):
            return False
        same_record = has_envelope(first) and \
            (line.prefix.ts, line.prefix.origin, line.prefix.pid, line.tag, line.frame_id) == \
            (first.prefix.ts, first.prefix.origin, first.prefix.pid, first.tag, first.frame_id)
        bare = not has_envelope(line) and (message[:1] in (" ", "\t") or message.strip().startswith(_GRAPH_BREAK_KEYS)
                                           or self._own_exc_info(message))
        blank_inside = not message.strip() and not has_envelope(line) and not has_envelope(first)
        # 2.0/2.1 logger lines carry no parsed stamp: the artifact in the logger name ties them together
        same_artifact = artifact(first) == "__graph_breaks" and artifact(line) == "__graph_breaks" and not line.tag
        if same_record or (bare and message.strip()) or blank_inside or same_artifact:
            self.lines.append(line)
            return True
        return False

    def _own_exc_info(self, message: str) -> bool:
        """PyTorch 2.1 logged the break with exc_info: an unprefixed traceback ending in
        torch._dynamo.exc.Unsupported follows the user frames. It belongs to the report."""
        bodies = [dynamo_message(l) for l in self.lines]
        in_tb = any(b.startswith(TRACEBACK_HEADER) for b in bodies)
        if message.startswith(TRACEBACK_HEADER):
            return not in_tb and any("from user code at" in b or b.startswith("WON'T CONVERT") for b in bodies)
        ended = any(_EXC_LINE.match(b) for b in bodies[1:])
        return in_tb and not ended and bool(_EXC_LINE.match(message))

    def _item_warning_continues(self, message: str) -> bool:
        """`Graph break from Tensor.item()` is followed by its "Graph break: from user code at:" part."""
        return message.startswith("Graph break: from user code at") and \
            dynamo_message(self.lines[0]).startswith("Graph break from ") and \
            not any(dynamo_message(l).startswith("Graph break: ") for l in self.lines[1:])

    def attrs(self) -> dict:
        bodies = [dynamo_message(l) for l in self.lines]
        reason: list[str] = []
        hints, explanation, frames, location, url = [], "", [], "", ""
        section = ""
        for b in bodies:
            s = b.strip()
            if b.startswith("Graph break in user code at "):
                location = b[len("Graph break in user code at "):].strip()
            elif b.startswith("Graph break (") and " in user code at " in b:
                location = b.split(" in user code at ", 1)[1].strip()
            elif b.startswith("Graph break: ") or b.startswith("Graph break from "):
                head = b.split(": ", 1)[1] if b.startswith("Graph break: ") else b[len("Graph break from "):]
                head = head.split(" from user code at", 1)[0].split(", consider setting", 1)[0].strip()
                if head and head != "from user code at:":
                    reason.append(head)
                section = "frames" if "from user code at" in b else section
            elif b.startswith(TRACEBACK_HEADER):
                section = "exc_info"  # Dynamo's own frames, not the user's
            elif (wc := _WONT_CONVERT.match(b)):
                location = f"{wc.group(2)}:{wc.group(3)}"
                reason.append(f"whole frame {wc.group(1)} left uncompiled, due to")
            elif section == "exc_info" and _EXC_LINE.match(b):
                cls, msg = b.split(": ", 1)
                reason.append(f"{cls.rsplit('.', 1)[-1]}: {msg.strip()}")
                section = ""
            elif not reason and _DYNAMO_EXC.match(s):
                cls, msg = s.split(": ", 1)
                reason.append(f"{cls.rsplit('.', 1)[-1]}: {msg.strip()}")
            elif s.startswith("from user code:"):
                section = "frames"
            elif b.startswith(("Graph Break Reason:", "Reason:")):
                reason.append(s.split(":", 1)[1].strip())
                section = "reason"
            elif s.startswith("Explanation:"):
                explanation, section = s[len("Explanation:"):].strip(), "explanation"
            elif s.startswith("Hint:"):
                hints.append(s[len("Hint:"):].strip())
                section = "hint"
            elif s.startswith("User code traceback:"):
                section = "frames"
            elif (m := _FRAME.match(b)) and section == "frames":
                frames.append({"file": m.group(1), "line": int(m.group(2)), "func": (m.group(3) or "").strip()})
            elif "please visit:" in s:
                url = s.rsplit(" ", 1)[-1]
                section = ""
            elif s.startswith("Developer debug context:"):
                section = ""
            elif section == "reason" and s:
                reason.append(s)  # the reason's own wrapped lines (e.g. the break type)
        if not hints and any("capture_scalar_outputs" in b for b in bodies):
            hints.append("set torch._dynamo.config.capture_scalar_outputs = True (or TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS=1)")
        why = " ".join(reason) or explanation or "(reason not printed in this excerpt)"
        where = location or (f"{frames[-1]['file']}:{frames[-1]['line']}" if frames else "")
        return {"reason": why, "explanation": explanation, "hints": hints,
                "hint": hints[0] if hints else break_hint(" ".join(bodies)),
                "summary": f"{why} at {where or 'an unknown location'}"
                           + (f". {explanation}" if explanation and explanation != why else ""),
                "user_location": where, "user_frames": frames, "frame_id": self.lines[0].frame_id, "doc_url": url,
                "text": "\n".join(l.text for l in self.lines)}


# the analyzer's verdicts across versions: ranks missing, a mismatch ("has errors"), an
# all-to-all whose totals disagree; 2.5 wrote "Collective N at entry M errors"
@dataclass
class DeviceAsserts:
    """A burst of device-side assertion lines: the CUDA runtime prints one per faulting GPU
    thread (often hundreds, interleaved across ranks). ONE event with the counts, the
    sites, the conditions and the ranks; the evidence text keeps the first lines only."""
    lines: list[Line]
    parsed: list[dict] = field(default_factory=list)
    TEXT_LINES = 20

    @staticmethod
    def open(line: Line) -> "DeviceAsserts | None":
        body = line.prefix.body
        found = parse_device_assert(body) if "ssertion" in body else None
        return DeviceAsserts([line], [found]) if found else None

    def offer(self, line: Line) -> bool:
        body = line.prefix.body
        found = parse_device_assert(body) if "ssertion" in body else None
        if found is None:
            return False
        self.lines.append(line)
        self.parsed.append(found)
        return True

    def attrs(self) -> dict:
        first = self.parsed[0]
        sites = sorted({f"{p['assert_file']}:{p['assert_line']}" for p in self.parsed if p.get("assert_file")})
        conditions = sorted({p["assert_condition"] for p in self.parsed})
        ranks = sorted({l.prefix.rank for l in self.lines if l.prefix.rank is not None})
        threads = sum(p["assert_threads"] for p in self.parsed)
        out = dict(first) | {"assert_threads": threads, "assert_lines": len(self.lines),
                             "assert_blocks": len({tuple(p["block"]) for p in self.parsed}),
                             "assert_sites": sites[:20], "assert_conditions": conditions[:20], "ranks": ranks}
        out |= assert_summary(out)
        if ranks:
            out["detail"] += f"; ranks {', '.join(map(str, ranks[:16]))}" + (" ..." if len(ranks) > 16 else "")
        if len(ranks) == 1:
            out["rank"] = ranks[0]
        shown = [l.text for l in self.lines[:self.TEXT_LINES]]
        if len(self.lines) > self.TEXT_LINES:
            shown.append(f"... {len(self.lines) - self.TEXT_LINES} more assertion line(s)")
        out["text"] = "\n".join(shown)
        return out


@dataclass
class SmiMemorySection:
    """An `nvidia-smi -q` memory section pasted into a log ("ECC Errors", "Retired Pages",
    "Remapped Rows"): "Pending : Yes" means a pending repair only under "Remapped Rows", so the
    section is read as a whole; ONE event when it shows damaged memory (logs.gpu)."""
    lines: list[Line]
    indent: int = 0

    @staticmethod
    def open(line: Line) -> "SmiMemorySection | None":
        indent = smi_memory_header(line.prefix.body)
        return SmiMemorySection([line], indent) if indent is not None else None

    def offer(self, line: Line) -> bool:
        if len(self.lines) < 200 and smi_section_member(line.prefix.body, self.indent):
            self.lines.append(line)
            return True
        return False

    def event(self) -> Hit | None:
        return smi_memory_event([l.prefix.body for l in self.lines])


@dataclass
class DcgmDiagRow:
    """A dcgmi diag result row whose message wraps over the next rows of the table
    ("| Error | GPU 3 has uncorrectable memory errors and row  |" + "|  |  remappings are pending |")."""
    lines: list[Line]

    @staticmethod
    def open(line: Line) -> "DcgmDiagRow | None":
        return DcgmDiagRow([line]) if dcgm_row_start(line.prefix.body) else None

    def offer(self, line: Line) -> bool:
        if len(self.lines) < 40 and dcgm_row_continues(line.prefix.body):
            self.lines.append(line)
            return True
        return False

    def event(self) -> Hit | None:
        text = dcgm_row_text([l.prefix.body for l in self.lines])
        hit = classify_gpu_line(text) if text else None
        if hit:
            hit.attrs.setdefault("text", text)
        return hit


_FR_HEADER = re.compile(r"^(?:Not all ranks joining collective(?:[:,] sequence number: (?P<missing>\d+)|"
                        r" (?P<missing_old>\d+) at entry \d+)|"
                        r"Collective sequence number: (?P<errors>\d+) has errors|"
                        r"Collective (?P<errors_old>\d+) at entry \d+ errors|"
                        r"Input/output mismatch in the collective(?: sequence number: (?P<alltoall>\d+)|"
                        r" (?P<alltoall_old>\d+) at entry \d+|(?P<alltoall_print> (?:\d+ )?for group)))")
_FR_FIELD = re.compile(r"^(internal record id|group info|collective|missing ranks|input sizes|output sizes|"
                       r"world size|expected ranks|collective state|error msg|error message|total input numel|"
                       r"total output numel|collective stack trace):\s*(.*)$")
_FR_ERROR = re.compile(r"Culprit rank (\d+); Error type: (\w+)(?:, (.{0,800}?))?(?=, Culprit rank |$)")
# MatchState names that say the ranks called different collectives (a state mismatch does not)
FR_MISMATCH_TYPES = ("COLLECTIVE_TYPE_MISMATCH", "SIZE_OR_SYNTAX_MISMATCH", "COLLECTIVE_DTYPE_MISMATCH")
_FR_INTS = re.compile(r"-?\d+")


@dataclass
class FlightRecorderVerdict:
    """PyTorch's flight-recorder analyzer (`python -m torch.distributed.flight_recorder.fr_trace`)
    prints its verdict as a header line and `key: value` lines, then the collective's stack."""
    lines: list[Line]

    @staticmethod
    def starts(line: Line) -> bool:
        return bool(_FR_HEADER.match(line.prefix.body))

    def offer(self, line: Line) -> bool:
        body = line.prefix.body
        in_stack = any(_FR_FIELD.match(l.prefix.body) and l.prefix.body.startswith("collective stack trace")
                       for l in self.lines)
        if _FR_FIELD.match(body) or (in_stack and body.strip() and " at " in body):
            self.lines.append(line)
            return True
        return False

    def event(self) -> tuple[str, str, str]:
        """(kind, name, severity): ranks missing, ranks that disagree, or only a state difference."""
        a = self.attrs()
        if a["verdict"] == "missing":
            return "error", "FRMissingRanks", "critical"
        if a["verdict"] == "alltoall" or set(a["error_types"]) & set(FR_MISMATCH_TYPES):
            return "error", "FRCollectiveMismatch", "critical"
        return "log", "FRCollectiveErrors", "warning"

    def attrs(self) -> dict:
        head = _FR_HEADER.match(self.lines[0].prefix.body)
        assert head is not None  # the block opened on this header
        verdict, seq = next((k, v) for k, v in head.groupdict().items() if v is not None)
        out: dict = {"seq": int(seq) if seq.isdigit() else None,
                     "verdict": verdict.replace("_old", "").replace("_print", "")}
        for line in self.lines[1:]:
            m = _FR_FIELD.match(line.prefix.body)
            if not m:
                continue
            key, value = m.group(1).replace(" ", "_"), m.group(2).strip()
            if key in ("missing_ranks", "expected_ranks"):
                out[key] = [int(x) for x in _FR_INTS.findall(value)]
            elif key in ("world_size", "internal_record_id"):
                out[key] = int(value) if value.lstrip("-").isdigit() else value
            elif key != "collective_stack_trace":
                out[key] = value
        out["state"] = out.pop("collective_state", "")
        group = out.pop("group_info", "")
        out["pg"] = group.split(":", 1)[1] if ":" in group else group
        out["pg_id"] = group.split(":", 1)[0] if ":" in group else ""
        out["op"] = out.get("collective", "")
        errors = [{"rank": int(r), "type": t, "detail": (d or "").strip()}
                  for r, t, d in _FR_ERROR.findall(out.pop("error_msg", out.pop("error_message", "")))]
        out["errors"] = errors
        out["error_types"] = sorted({e["type"] for e in errors})
        out["culprit_ranks"] = sorted({e["rank"] for e in errors if e["type"] in FR_MISMATCH_TYPES})
        out["culprit"] = ", ".join(map(str, out["culprit_ranks"])) or "not named"
        out["detail"] = "; ".join(f"rank {e['rank']}: {e['detail'] or e['type']}" for e in errors) or (
            f"total input numel {out.get('total_input_numel', '?')} vs total output numel "
            f"{out.get('total_output_numel', '?')} across the ranks" if out["verdict"] == "alltoall" else "")
        out["summary"] = (f"rank(s) {out['culprit']} called it differently ({', '.join(out['error_types'])}): "
                          f"{out['detail']}" if errors else
                          f"the all-to-all's totals disagree, {out['detail']} (no single culprit rank)"
                          if out["verdict"] == "alltoall" else out["detail"])
        out["text"] = "\n".join(l.text for l in self.lines)
        return out
