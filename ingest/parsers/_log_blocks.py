"""Multi-line records in text logs: Python tracebacks and torch.compile graph-break reports.

A traceback becomes ONE event: header, frames, source lines, the exception line and the
lines torch appends to a CUDA error message. Excerpts often start mid-traceback (at a
frame or at an indented source line) or stop before the exception line; both still group.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ingest.parsers._log_prefix import Prefix

TRACEBACK_HEADER = "Traceback (most recent call last):"
CHAINED = ("During handling of the above exception, another exception occurred:",
           "The above exception was the direct cause of the following exception:")
_FRAME = re.compile(r'^\s+File "([^"]+)", line (\d+)(?:, in (.+))?')
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:::\w+)*)(?::\s?(.*))?$")
_EXCEPTION_SUFFIXES = ("Error", "Exception", "Exit", "Interrupt", "Failure", "Fault")
# Lines torch (and the CUDA runtime) append to an exception message.
_MESSAGE_CONTINUATIONS = (
    "CUDA kernel errors might be asynchronously reported", "For debugging consider passing CUDA_LAUNCH_BLOCKING",
    "Compile with `TORCH_USE_CUDA_DSA`", "Search for `cuda", "Device-side assertions were explicitly omitted",
    "Exception raised from ", "frame #",
)
_GRAPH_BREAK_START = ("Graph break in user code at ", "Graph break: ", "Graph Break Reason:")


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
    if not (last.endswith(_EXCEPTION_SUFFIXES) or last == "Error"):
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


@dataclass
class Traceback:
    lines: list[Line]
    frames: list[dict] = field(default_factory=list)
    source: list[str] = field(default_factory=list)
    exception: str = ""
    message: list[str] = field(default_factory=list)
    header: bool = False
    state: str = "frames"  # frames -> message

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
            elif body[:1] in (" ", "\t") and body.strip():
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
        cls_prefix = f"{self.exception}:" if self.exception else ""
        return {
            "text": "\n".join(l.text for l in self.lines),
            "message": first_message,
            "exception_message": first_message[len(cls_prefix):].strip() if cls_prefix else first_message,
            "exception": self.exception,
            "frames": self.frames,
            "raising_statement": self.source[-1] if self.source else "",
            "truncated": not self.exception or not self.header,
            "during_cuda_graph_capture": any(
                "capture" in f["func"] or f["file"].replace("\\", "/").endswith("cuda/graphs.py")
                for f in self.frames) or "capture" in first_message.lower(),
        }


@dataclass
class GraphBreak:
    """torch._logging prints one graph-break report as several lines with one header."""
    lines: list[Line]

    @staticmethod
    def starts(line: Line) -> bool:
        return line.prefix.body.startswith(_GRAPH_BREAK_START)

    def offer(self, line: Line) -> bool:
        first = self.lines[0]
        same_record = (line.prefix.ts, line.prefix.origin, line.prefix.pid, line.tag, line.frame_id) == \
            (first.prefix.ts, first.prefix.origin, first.prefix.pid, first.tag, first.frame_id)
        if same_record and not line.prefix.body.startswith(_GRAPH_BREAK_START[:2]):
            self.lines.append(line)
            return True
        return False

    def attrs(self) -> dict:
        bodies = [l.prefix.body for l in self.lines]
        reason: list[str] = []
        hints, explanation, frames, location, url = [], "", [], "", ""
        section = ""
        for b in bodies:
            s = b.strip()
            if b.startswith("Graph break in user code at "):
                location = b[len("Graph break in user code at "):].strip()
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
        return {"reason": " ".join(reason), "explanation": explanation, "hints": hints,
                "user_location": location or (f"{frames[-1]['file']}:{frames[-1]['line']}" if frames else ""),
                "user_frames": frames, "frame_id": self.lines[0].frame_id, "doc_url": url,
                "text": "\n".join(l.text for l in self.lines)}


_FR_HEADER = re.compile(r"^Not all ranks joining collective[:,] sequence number: (\d+)")
_FR_FIELD = re.compile(r"^(internal record id|group info|collective|missing ranks|input sizes|output sizes|"
                       r"world size|expected ranks|collective state|collective stack trace):\s*(.*)$")
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

    def attrs(self) -> dict:
        out: dict = {"seq": int(_FR_HEADER.match(self.lines[0].prefix.body).group(1))}
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
        out["text"] = "\n".join(l.text for l in self.lines)
        return out
