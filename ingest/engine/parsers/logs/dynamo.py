"""TorchDynamo's multi-line reports about compilation: recompilations, `torch._dynamo.explain`
output and the CompileProfiler report. Each becomes ONE `log` event (DynamoRecompile,
DynamoExplain, DynamoProfilerReport) whose attrs carry the counts and reasons; none of them is
an error, and their `File ...` / `<FrameSummary ...>` lines must never open a traceback.

Wordings covered (PyTorch 1.13 torchdynamo to 2.9):
  torch._dynamo hit config.recompile_limit (8) / config.cache_size_limit (8) / torchdynamo hit
  recompilation cache limit (64) for function 'f' (...), then "function: 'f' (file:line)" and
  "last reason: ..."; TORCH_LOGS=recompiles "Recompiling function f in file:line" + "triggered by
  the following guard failure(s):" + "- reason"; explain's "Graph Count: N" / "Graph Break Count: N"
  / "Break Reason N:" and the pre-release "Dynamo produced N graphs with M graph break and K ops";
  "Torchdynamo Profiler Report" with its graph-break and recompilation tables.

Patterns are fixed (ours) and anchored; repetition is bounded.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ingest.engine.parsers.logs.blocks import Line, artifact, break_hint, dynamo_message, has_envelope

MAX_REPORT_LINES = 400   # a report cut off at the end of an excerpt must not swallow the rest of the file
MAX_REASONS = 20

_LIMIT_HIT = re.compile(r"hit (?:config\.)?(recompile_limit|cache_size_limit|accumulated_recompile_limit|"
                        r"accumulated_cache_size_limit|recompilation cache limit) \((\d+)\)")
_LIMIT_FUNCTION = re.compile(r"for function '([^']+)' \(([^)]{1,500})\)")
# 2.1-dev printed the message as a tuple: "('Recompiling function f in file:3', 'triggered by ...')"
_RECOMPILING = re.compile(r"^\(?['\"]?Recompiling function (\S+) in ([^\s'\",]+)")
_HEAD_REASON = re.compile(r"guard failures?(?:\(s\))?: ?(.{1,500})")
_RECOMPILE_ARTIFACTS = ("__recompiles", "__recompiles_verbose")
_FUNCTION = re.compile(r"^function: '([^']+)' \(([^)]{1,500})\)")
_REASON_KEYS = ("last reason:", "reasons:")
_RECOMPILE_KEYS = ("function:", "last reason:", "reasons:", "triggered by the following guard failure",
                   "- ", "guard ", "To log all recompilation reasons", "To diagnose recompilation issues")

_EXPLAIN_START = re.compile(r"^(?:Graph Count: \d+\s*$|Graph Break Count: \d+|Dynamo produced \d+ graphs?)")
_EXPLAIN_KEYS = re.compile(r"^(?:Graph Count|Graph Break Count|Op Count|Break Reasons|Break reasons|Ops per Graph|"
                           r"Out Guards|Compile Times):|^\d{1,4}\. ")
_PRODUCED = re.compile(r"Dynamo produced (\d+) graphs?,? ?with (\d+) graph breaks? and (\d+) ops")
_COUNT = {"graph_count": re.compile(r"^Graph Count: (\d+)"), "graph_break_count": re.compile(r"^Graph Break Count: (\d+)"),
          "op_count": re.compile(r"^Op Count: (\d+)")}
_FRAME_SUMMARY = re.compile(r"<FrameSummary file ([^,]{1,500}), line (\d+) in ([^>]{1,200})>")
_FILE_LINE = re.compile(r'^\s+File "([^"]{1,500})", line (\d+)(?:, in (\S+))?')
_LEGACY_REASON = re.compile(r"^\d{1,4}\. (.+)$")

_PROFILER_START = re.compile(r"^Torchdynamo Profiler Report:?\s*$")
_TABLE_RULE = re.compile(r"^-{3,}[ -]*$")
_BREAK_ROW = re.compile(r"^(\S.{0,400}?)\s{2,}(\d+)\s*$")
_RECOMPILE_ROW = re.compile(r"^[|\s]{0,4}'([^']+)' \(([^)]{1,500})\)\s*\|?\s*(\d+)")
_CACHE_HINT = re.compile(r"Set torch\._dynamo\.config\.cache_size_limit to (\d+)")
_PROFILER_END = ("No recompilation detected", "No cache-limited recompilations detected")


@dataclass
class DynamoReport:
    """Base of the three reports: a header line, then lines that belong to it."""
    lines: list[Line]
    name = "DynamoReport"

    @staticmethod
    def open(line: Line) -> "DynamoReport | None":
        for kind in (RecompileReport, ExplainReport, ProfilerReport):
            if kind.starts(line):
                return kind([line])
        return None

    @staticmethod
    def starts(line: Line) -> bool:
        return False

    def offer(self, line: Line) -> bool:
        if len(self.lines) >= MAX_REPORT_LINES or self.next_report(line):
            return False
        if self.belongs(line, dynamo_message(line)):
            self.lines.append(line)
            return True
        return False

    @classmethod
    def heads(cls, line: Line) -> bool:
        """The line is a report's own first line (not a record picked up in its middle)."""
        return cls.starts(line)

    def next_report(self, line: Line) -> bool:
        """The line opens another report, so this one ends."""
        return any(kind.heads(line) for kind in (RecompileReport, ExplainReport, ProfilerReport))

    def belongs(self, line: Line, message: str) -> bool:
        raise NotImplementedError

    def attrs(self) -> dict:
        raise NotImplementedError

    def value_of(self, attrs: dict) -> float:
        return math.nan

    def event(self) -> tuple[str, dict, float]:
        """(event name, attrs, value) of the whole report."""
        attrs = self.attrs()
        return self.name, attrs, self.value_of(attrs)

    def messages(self) -> list[str]:
        return [dynamo_message(l) for l in self.lines]

    def same_record(self, line: Line) -> bool:
        first = self.lines[0]
        return has_envelope(first) and (line.prefix.ts, line.prefix.pid, line.frame_id, line.tag) == \
            (first.prefix.ts, first.prefix.pid, first.frame_id, first.tag)


@dataclass
class RecompileReport(DynamoReport):
    """A recompile-limit warning or a TORCH_LOGS=recompiles entry, with its reasons."""
    name = "DynamoRecompile"

    @staticmethod
    def starts(line: Line) -> bool:
        return RecompileReport.heads(line) or \
            (artifact(line) in _RECOMPILE_ARTIFACTS and bool(dynamo_message(line).strip()))  # excerpt cut mid-record

    @classmethod
    def heads(cls, line: Line) -> bool:
        message = dynamo_message(line)
        return bool(_LIMIT_HIT.search(message) or _RECOMPILING.match(message.strip()))

    def belongs(self, line: Line, message: str) -> bool:
        if not message.strip():
            # recompiles_verbose separates its "guard N failures:" groups with blank lines
            return self.same_record(line) or (not has_envelope(line) and not has_envelope(self.lines[0])
                                              and bool(dynamo_message(self.lines[-1]).strip()))
        return self.same_record(line) or message.strip().startswith(_RECOMPILE_KEYS)

    def attrs(self) -> dict:
        msgs = [m.strip() for m in self.messages()]
        head = msgs[0]
        out: dict = {"function": "", "location": "", "limit": None, "limit_name": "", "reasons": []}
        if (hit := _LIMIT_HIT.search(head)):
            out.update(event="limit_hit", limit_name=hit.group(1).replace(" ", "_"), limit=int(hit.group(2)))
            if (fn := _LIMIT_FUNCTION.search(head)):
                out.update(function=fn.group(1), location=fn.group(2))
            if "guard failures:" in head:
                out["reasons"].append(_clip(head.split("guard failures:", 1)[1]))
        elif (rc := _RECOMPILING.match(head)):
            out.update(event="recompile", function=rc.group(1), location=rc.group(2))
            if (hr := _HEAD_REASON.search(head)):
                out["reasons"].append(_clip(hr.group(1).rstrip("'\")")))
        else:
            out["event"] = "recompile"   # the record's artifact tag says so; its head is cut off
        for m in msgs[1:]:
            if (fn := _FUNCTION.match(m)):
                out.update(function=fn.group(1), location=fn.group(2))
            elif m.startswith(_REASON_KEYS):
                out["reasons"].append(_clip(m.split(":", 1)[1]))
            elif m.startswith("- ") and len(out["reasons"]) < MAX_REASONS:
                out["reasons"].append(_clip(m[2:]))
        out["last_reason"] = out["reasons"][-1] if out["reasons"] else ""
        out["frame_id"] = self.lines[0].frame_id
        out["summary"] = _recompile_summary(out)
        out["text"] = "\n".join(l.text for l in self.lines)
        return out

    def value_of(self, attrs: dict) -> float:
        return float(attrs["limit"]) if attrs["limit"] is not None else 1.0


def unsupported_from_frames(frames: list[dict], source: list[str]) -> dict | None:
    """A traceback cut before its exception line whose last statement is Dynamo's own
    `unimplemented(...)` / `unimplemented_v2(...)`: Dynamo raised Unsupported, i.e. a graph break
    it was not allowed to take. The reason is the literal text of that call, when it has one."""
    if not source or not source[-1].startswith(("unimplemented(", "unimplemented_v2(", "raise Unsupported(")):
        return None
    if not any("_dynamo" in f["file"].replace("\\", "/") for f in frames[-3:]):
        return None
    m = _UNIMPLEMENTED_TEXT.search(source[-1])
    reason = m.group(1) if m else source[-1]
    return {"exception": "Unsupported", "reason": _clip(reason), "hint": break_hint(reason), "truncated": True,
            "summary": f"Dynamo raised Unsupported ({_clip(reason, 120)}); the exception line itself is cut off"}


_UNIMPLEMENTED_TEXT = re.compile(r"""(?:gb_type=|\()f?["']([^"']{1,300})["']""")


def _recompile_summary(a: dict) -> str:
    where = f"'{a['function']}' ({a['location']})" if a["function"] else "a compiled function"
    why = f"; last guard failure: {a['last_reason']}" if a["last_reason"] else ""
    if a.get("event") == "limit_hit":
        return (f"{where} hit {a['limit_name']} ({a['limit']}) and now runs eagerly{why}")
    return f"{where} was recompiled{why}"


@dataclass
class ExplainReport(DynamoReport):
    """`print(torch._dynamo.explain(fn)(*args))` (and the pre-release one-line summary)."""
    name = "DynamoExplain"

    @staticmethod
    def starts(line: Line) -> bool:
        return bool(_EXPLAIN_START.match(dynamo_message(line).strip()))

    def next_report(self, line: Line) -> bool:
        message = dynamo_message(line).strip()
        if message.startswith(("Graph Count:", "Dynamo produced ")):
            return True
        return RecompileReport.heads(line) or ProfilerReport.starts(line)

    def belongs(self, line: Line, message: str) -> bool:
        return not message.strip() or message[:1] in (" ", "\t") or bool(_EXPLAIN_KEYS.match(message))

    def attrs(self) -> dict:
        out: dict = {"graph_count": None, "graph_break_count": None, "op_count": None}
        reasons: list[str] = []
        locations: list[str] = []
        for m in self.messages():
            s = m.strip()
            if (p := _PRODUCED.search(s)):
                out.update(graph_count=int(p.group(1)), graph_break_count=int(p.group(2)), op_count=int(p.group(3)))
            for key, rx in _COUNT.items():
                if (c := rx.match(s)):
                    out[key] = int(c.group(1))
            if s.startswith("Reason:") and len(reasons) < MAX_REASONS:
                reasons.append(_clip(s[len("Reason:"):]))
            elif (lr := _LEGACY_REASON.match(s)) and len(reasons) < MAX_REASONS:
                reasons.append(_clip(lr.group(1)))
            if (fs := _FRAME_SUMMARY.search(s)):
                locations.append(f"{fs.group(1)}:{fs.group(2)} in {fs.group(3)}")
            elif (fl := _FILE_LINE.match(m)):
                locations.append(f"{fl.group(1)}:{fl.group(2)}" + (f" in {fl.group(3)}" if fl.group(3) else ""))
        out.update(reasons=reasons, user_locations=locations[:MAX_REASONS], reason=reasons[0] if reasons else "",
                   user_location=locations[0] if locations else "")
        out["summary"] = (f"explain() counted {_n(out['graph_break_count'])} graph break(s) and {_n(out['graph_count'])} graph(s)"
                          + (f"; first break: {out['reason']} at {out['user_location'] or 'an unknown location'}"
                             if reasons else ""))
        out["hint"] = break_hint(" ".join(reasons))
        out["text"] = "\n".join(l.text for l in self.lines)
        return out

    def value_of(self, attrs: dict) -> float:
        return float(attrs["graph_break_count"]) if attrs["graph_break_count"] is not None else math.nan


@dataclass
class ProfilerReport(DynamoReport):
    """`torch._dynamo.utils.CompileProfiler().report()`: a graph-break table and a recompile table."""
    name = "DynamoProfilerReport"
    done: bool = False

    @staticmethod
    def starts(line: Line) -> bool:
        return bool(_PROFILER_START.match(dynamo_message(line).strip()))

    def belongs(self, line: Line, message: str) -> bool:
        if self.done:
            return False
        s = message.strip()
        if s.startswith(_PROFILER_END) or _CACHE_HINT.search(s):
            self.done = True
        return True

    def attrs(self) -> dict:
        breaks: list[dict] = []
        recompiled: list[dict] = []
        table, hint = "", None
        for m in self.messages():
            s = m.strip()
            if s.startswith("Graph Break Reason"):
                table = "breaks"
            elif s.startswith("Function") and "Recompile" in s:
                table = "recompiles"
            elif not s:
                table = "" if table.endswith("_rows") else table
            elif _TABLE_RULE.match(s):
                table = f"{table}_rows" if table else ""
            elif table == "breaks_rows" and (row := _BREAK_ROW.match(s)) and len(breaks) < MAX_REASONS:
                breaks.append({"reason": row.group(1).strip(), "count": int(row.group(2))})
            elif table == "recompiles_rows" and (row := _RECOMPILE_ROW.match(m)) and len(recompiled) < MAX_REASONS:
                recompiled.append({"function": row.group(1), "location": row.group(2), "recompiles": int(row.group(3))})
            if (h := _CACHE_HINT.search(s)):
                hint = int(h.group(1))
        out = {"graph_break_reasons": breaks, "graph_breaks": sum(b["count"] for b in breaks),
               "recompiled": recompiled, "recompiles": sum(r["recompiles"] for r in recompiled),
               "cache_size_limit_hint": hint,
               "reason": breaks[0]["reason"] if breaks else "", "user_location": ""}
        top = max(breaks, key=lambda b: b["count"])["reason"] if breaks else ""
        out["summary"] = (f"CompileProfiler counted {out['graph_breaks']} graph break(s) ({len(breaks)} distinct reason(s)"
                          + (f", most frequent: {top}" if top else "") + f") and {out['recompiles']} recompilation(s)"
                          + "".join(f"; '{r['function']}' recompiled {r['recompiles']}x" for r in recompiled[:3]))
        out["hint"] = break_hint(top)
        out["text"] = "\n".join(l.text for l in self.lines)
        return out

    def value_of(self, attrs: dict) -> float:
        return float(attrs["graph_breaks"])


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


def _clip(text: str, limit: int = 300) -> str:
    """Reasons are single lines; collapse the padding torch puts before its source comments."""
    return " ".join(text.split())[:limit]
