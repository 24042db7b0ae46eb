"""Line envelopes of text logs: who wrote the line, when, at which level.

A log line arrives wrapped in zero or more prefixes added by the program's logger and by
whatever collected it: a collector's date, a user's line counter, a pdsh host name, a
vLLM process tag, torch's `[rankN]:`, an exception group's `|`, and finally the logger's
own header (glog, vLLM, DeepSpeed, SGLang, TensorRT, ISO, syslog, dmesg ...). `split_line`
peels them off in order and returns the message body with what they said.

All patterns here are fixed (ours), so they run on Python `re`.
"""
from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field
from typing import Callable

_LEVELS = {
    "I": "info", "W": "warning", "E": "error", "F": "critical", "V": "debug", "D": "debug",
    "DEBUG": "debug", "INFO": "info", "WARN": "warning", "WARNING": "warning", "ERROR": "error",
    "CRITICAL": "critical", "FATAL": "critical", "TRACE": "debug", "NOTICE": "info",
}
_MONTHS = {m: i for i, m in enumerate(calendar.month_abbr) if m}


@dataclass
class Prefix:
    body: str
    ts: int | None = None          # ns since epoch, when the line says when
    year_assumed: bool = False     # the stamp had no year: one was supplied
    severity: str = ""
    host: str = ""
    pid: int = -1
    tid: int = -1
    device: int = -1
    rank: int | None = None        # global rank from torch's [rankN]: prefix
    origin: str = ""               # logger's source location, e.g. ProcessGroupNCCL.cpp:689
    extra: dict = field(default_factory=dict)


# --- envelopes added outside the program --------------------------------------------------
# a tqdm bar whose line was never ended, so the next record is glued behind it:
# "  0%|          | 0/6 [00:00<?, ?it/s]skipping ...", "[00:00<?, ?it/s][rank0]:W0202 ...",
# "Processed prompts:  0%| | 0/2 [00:00<?, ?it/s, est. speed input: 0.00 toks/s](EngineCore ...)"
_PROGRESS = re.compile(r"^[^\[\]\n]{0,300}?\[\d{1,4}:\d\d(?::\d\d)?(?:<(?:\?|\d{1,4}:\d\d(?::\d\d)?))?, {0,3}"
                       r"(?:\?|\d[\d.]{0,12} ?)(?:it|s|[A-Za-z]{1,8})/(?:s|it)\b[^\[\]]{0,300}\](?=\S)")
_COLLECTOR = re.compile(r"^ ?(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}) (?=\S)")   # " 2025-02-18 12:54 "
_COUNTER = re.compile(r"^\[(\d+)\] (?=\S)")                                    # "[80746] "
# "vm-07-05: ": a host token with a digit in it. The digit is checked in Python: "[\w.-]*\d[\w.-]*" backtracks
# quadratically over a long run of word characters and digits.
_PDSH = re.compile(r"^([A-Za-z][\w.-]*): ")
# "(Worker_TP1 pid=15193) ", "(VllmWorker rank=3 pid=1090) ", Ray's "(RayWorkerWrapper pid=206994, ip=10.0.0.2) "
_VLLM_PROC = re.compile(r"^\((\w[\w =]{0,60}?) pid=(\d+)(?:, ip=[\w.:]{1,64})?\) ")
_RANK = re.compile(r"^\[rank(\d+)\]: ?")  # "[rank0]:" (C++ logs), "[rank0]: " (Python: the original line follows)
_EXC_GROUP = re.compile(r"^ +\| ?")                                            # "    | "

# --- the program's own logger header ---------------------------------------------------------
# glog writes the month without zero padding in torch's c10 logger: E218 = Feb 18, E1206 = Dec 6
_GLOG_BRACKET = re.compile(
    r"^\[([IWEF])(\d{1,2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d+))? ([^\]\s]+)\] ?")
_GLOG_LEGACY = re.compile(r"^\[([IWEF]) ([\w./-]+:\d+)\] ?")                  # "[E ProcessGroupNCCL.cpp:455] "
_GLOG_PY = re.compile(                                                          # torch._logging
    r"^([IWEFVD])(\d{1,2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d+) (\d+) ([^\]\s]+)\] ?")
_VLLM = re.compile(
    r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.\d+)? "
    r"\[?([\w./-]+:\d+)\] ?")
_DEEPSPEED = re.compile(
    r"^\[(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}),(\d{3})\] \[(\w+)\] \[([^\]]+)\] ?")
_SGLANG = re.compile(r"^\[(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?: ([^\]]+))?\] ?")
_TENSORRT = re.compile(r"^\[(\d{2})/(\d{2})/(\d{4})-(\d{2}):(\d{2}):(\d{2})\] \[([VIWEF])\] ?")
_ISO = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?"
    r"(?: +(DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL)\b:?)? ?")
_SYSLOG = re.compile(
    r"^([A-Z][a-z]{2}) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\S+) ([^\s:\[]+)(?:\[(\d+)\])?: ")
_DMESG_T = re.compile(r"^\[[A-Z][a-z]{2} ([A-Z][a-z]{2}) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})\] ")
_DMESG = re.compile(r"^\[ *(\d+\.\d+)\] ")
_PYLOGGING = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):([\w.]+):")   # logging.basicConfig
_LEVEL_WORD = re.compile(r"^\s*\[?(DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL)\]?[:\s]")
_NCCL_DEBUG = re.compile(r"^([\w.-]+):(\d+):(\d+) \[(\d+)\] NCCL (INFO|WARN|ERROR|TRACE|ABORT) ")
# An application's own envelope: a clock-only stamp, then the level, alone or after the logger's name:
# "[16:10:42] health/ERROR  ", "[12:00:01.250] ERROR    ", "[09:15:02] worker.main:WARNING ", "[10:00:00] [INFO] "
# (rich's console, CLI tools' loggers). The level word must close the envelope, so a message that
# merely starts with a clock keeps its text.
_CLOCK_LEVEL = re.compile(
    r"^\[(\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?\] {1,4}(?:([\w.-]{1,64})[/:|] ?)?\[?"
    r"(DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL)\]?(?::| |$) {0,8}")


def _ns(year: int, month: int, day: int, h: int, m: int, s: int, frac: str | None = None,
        tz: str | None = None) -> int | None:
    try:
        secs = calendar.timegm((year, month, day, h, m, s, 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    if not (1 <= month <= 12 and 1 <= day <= 31 and h < 24 and m < 60 and s < 61):
        return None
    ns = secs * 1_000_000_000 + (int(frac.ljust(9, "0")[:9]) if frac else 0)
    if tz and tz != "Z":
        sign = -1 if tz[0] == "+" else 1  # local time minus its offset is UTC
        digits = tz[1:].replace(":", "")
        ns += sign * (int(digits[:2]) * 3600 + int(digits[2:4]) * 60) * 1_000_000_000
    return ns


def split_line(line: str, year: int) -> Prefix:
    """Peel envelopes and the logger header off `line`; `year` fills stamps that lack one."""
    p = Prefix(body=line)
    body = line
    outer_year: int | None = None
    # Envelopes come in a fixed outer-to-inner order; each is optional. Each pattern runs only when
    # the line starts with a character it can start with (most lines have none of them).
    m = _PROGRESS.match(body) if ("/s" in body or "/it" in body) else None
    if m:
        p.extra["progress_bar"] = True
        body = body[m.end():]
    m = _COLLECTOR.match(body) if body[:1] == " " or body[:1].isdecimal() else None
    if m:
        outer_year = int(m.group(1))
        p.extra["collector_time"] = m.group(0).strip()
        body = body[m.end():]
    m = _COUNTER.match(body) if body[:1] == "[" else None
    if m:
        p.extra["line_counter"] = int(m.group(1))
        body = body[m.end():]
    m = _PDSH.match(body) if body[:1].isalpha() else None
    if m and any(c.isdecimal() for c in m.group(1)) and not m.group(1).endswith(("Error", "Exception", "Warning")):
        p.host = m.group(1)
        body = body[m.end():]
    m = _VLLM_PROC.match(body) if body[:1] == "(" else None
    if m:
        p.extra["process"], p.pid = m.group(1), int(m.group(2))
        body = body[m.end():]
    m = _RANK.match(body) if body.startswith("[rank") else None
    if m:
        p.rank = int(m.group(1))
        body = body[m.end():]
    m = _EXC_GROUP.match(body) if body[:1] == " " else None
    if m:
        p.extra["exception_group"] = True
        body = body[m.end():]
    p.body = _logger_header(body, p, outer_year or year, outer_year is None)
    return p


def _logger_header(body: str, p: Prefix, year: int, year_is_assumed: bool) -> str:
    """Read the first logger header that matches; return the rest of the line. Only the headers
    that can start with the line's first character are tried, in `_HEADERS` order."""
    head = body[:1]
    headers = _BY_HEAD.get(head)
    if headers is None:
        headers = _headers_for(head)
    for header in headers:
        if header.needs and header.needs not in body:
            continue
        m = header.pattern.match(body)
        if m:
            return header.read(m, body, p, _Year(year, year_is_assumed))
    return body


@dataclass(frozen=True)
class _Year:
    """The year for stamps without one, and whether it was assumed (no collector date said it)."""
    value: int
    assumed: bool


def _glog_bracket(m: re.Match, body: str, p: Prefix, year: _Year) -> str:
    p.severity = _LEVELS[m.group(1)]
    p.ts = _ns(year.value, int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)),
               int(m.group(6)), m.group(7))
    p.year_assumed = year.assumed
    p.origin = m.group(8)
    return body[m.end():]


def _glog_py(m: re.Match, body: str, p: Prefix, year: _Year) -> str:
    p.severity = _LEVELS[m.group(1)]
    p.ts = _ns(year.value, int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)),
               int(m.group(6)), m.group(7))
    p.year_assumed = year.assumed
    p.pid, p.origin = int(m.group(8)), m.group(9)
    return body[m.end():]


def _level_and_origin(m: re.Match, body: str, p: Prefix, year: _Year) -> str:
    """Headers that say only the level and where: legacy glog, logging.basicConfig."""
    p.severity, p.origin = _LEVELS[m.group(1)], m.group(2)
    return body[m.end():]


def _vllm(m: re.Match, body: str, p: Prefix, year: _Year) -> str:
    p.severity = _LEVELS[m.group(1)]
    p.ts = _ns(year.value, int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)), int(m.group(6)))
    p.year_assumed = year.assumed
    p.origin = m.group(7)
    return body[m.end():]


def _deepspeed(m: re.Match, body: str, p: Prefix, year: _Year) -> str:
    g = m.groups()
    p.ts = _ns(int(g[0]), int(g[1]), int(g[2]), int(g[3]), int(g[4]), int(g[5]), g[6])
    p.severity = _LEVELS.get(g[7].upper(), "")
    p.origin = g[8]
    return body[m.end():]


def _tensorrt(m: re.Match, body: str, p: Prefix, year: _Year) -> str:
    g = m.groups()
    p.ts = _ns(int(g[2]), int(g[0]), int(g[1]), int(g[3]), int(g[4]), int(g[5]))
    p.severity = _LEVELS[g[6]]
    return body[m.end():]


def _sglang(m: re.Match, body: str, p: Prefix, year: _Year) -> str:
    g = m.groups()
    p.ts = _ns(int(g[0]), int(g[1]), int(g[2]), int(g[3]), int(g[4]), int(g[5]))
    if g[6]:
        p.extra["worker"] = g[6]
    return body[m.end():]


# TensorFlow/XLA's C++ logging after the ISO stamp: "2023-07-19 22:08:36.875173: F ./tensorflow/...h:174] "
_TF_LEVEL = re.compile(r"^: ([IWEF]) ([\w./-]{1,300}:\d{1,6})\] ?")
_TF_LEVELS = {"I": "info", "W": "warning", "E": "error", "F": "critical"}
# ONNX Runtime's logger after the stamp: "[E:onnxruntime:Default, provider_bridge_ort.cc:1992 Fn] ",
# "[I:onnxruntime:, sequential_executor.cc:176 ...] " (severity letter, logger id, file:line)
_ORT_LEVEL = re.compile(r"^\[([VIWEF]):onnxruntime:[^,\]\n]{0,120}, ([\w.-]{1,200}:\d{1,6})[^\]\n]{0,300}\] ?")
_ORT_LEVELS = {"V": "debug", **_TF_LEVELS}


def _iso(m: re.Match, body: str, p: Prefix, year: _Year) -> str:
    g = m.groups()
    p.ts = _ns(int(g[0]), int(g[1]), int(g[2]), int(g[3]), int(g[4]), int(g[5]), g[6], g[7])
    if g[8]:
        p.severity = _LEVELS[g[8]]
    rest = body[m.end():]
    t = _TF_LEVEL.match(rest) if not g[8] and rest[:1] == ":" else None
    if t:
        p.severity, p.origin = _TF_LEVELS[t.group(1)], t.group(2)
        rest = rest[t.end():]
    o = _ORT_LEVEL.match(rest) if not g[8] and rest.startswith("[") and ":onnxruntime:" in rest[:16] else None
    if o:
        p.severity, p.origin = _ORT_LEVELS[o.group(1)], o.group(2)
        rest = rest[o.end():]
    return rest


def _syslog(m: re.Match, body: str, p: Prefix, year: _Year) -> str:
    g = m.groups()
    p.ts = _ns(year.value, _MONTHS.get(g[0], 0), int(g[1]), int(g[2]), int(g[3]), int(g[4]))
    p.year_assumed = year.assumed
    p.host, p.extra["program"] = g[5], g[6]
    if g[7]:
        p.pid = int(g[7])
    rest = body[m.end():]
    k = _DMESG.match(rest)  # kernel lines in syslog keep dmesg's uptime stamp
    if k:
        p.extra["uptime_s"] = float(k.group(1))
        rest = rest[k.end():]
    return rest


def _dmesg_t(m: re.Match, body: str, p: Prefix, year: _Year) -> str:
    g = m.groups()
    p.ts = _ns(int(g[5]), _MONTHS.get(g[0], 0), int(g[1]), int(g[2]), int(g[3]), int(g[4]))
    return body[m.end():]


def _dmesg(m: re.Match, body: str, p: Prefix, year: _Year) -> str:
    p.extra["uptime_s"] = float(m.group(1))  # seconds since boot: not on the wall clock
    return body[m.end():]


def _nccl_debug(m: re.Match, body: str, p: Prefix, year: _Year) -> str:
    p.host, p.pid, p.tid, p.device = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
    p.severity = _LEVELS.get(m.group(5), "error")
    p.origin = "NCCL"
    p.extra["nccl_level"] = m.group(5)
    return body[m.end():]


def _clock_level(m: re.Match, body: str, p: Prefix, year: _Year) -> str:
    p.severity = _LEVELS[m.group(6)]
    p.extra["clock"] = body[1:m.end(3) if not m.group(4) else m.end(4)]  # no date: kept off the wall clock
    if m.group(5):
        p.origin = m.group(5)
    return body[m.end():]


def _level_word(m: re.Match, body: str, p: Prefix, year: _Year) -> str:
    p.severity = _LEVELS[m.group(1)]
    return body[m.end():].lstrip(" ")


def _bracket(head: str) -> bool:
    return head == "["


def _level_letter(head: str) -> bool:
    return head in ("D", "I", "W", "E", "C", "F", "V")


def _upper(head: str) -> bool:
    return "A" <= head <= "Z"


def _decimal(head: str) -> bool:
    return head.isdecimal()


def _any(head: str) -> bool:
    return True


@dataclass(frozen=True)
class _Header:
    pattern: re.Pattern
    starts: Callable[[str], bool]  # whether a line starting with this character can hold it
    read: Callable[[re.Match, str, Prefix, _Year], str]  # fills the prefix, returns the rest
    needs: str = ""  # a substring the line must hold before the pattern is tried


# First match wins, in this order (the order they were always tried in: moving one can change
# which header reads a line that two of them match, e.g. NCCL's debug prefix holds a level word).
_HEADERS = (
    _Header(_GLOG_BRACKET, _bracket, _glog_bracket),
    _Header(_GLOG_PY, _level_letter, _glog_py),
    _Header(_GLOG_LEGACY, _bracket, _level_and_origin),
    _Header(_VLLM, _level_letter, _vllm),
    _Header(_DEEPSPEED, _bracket, _deepspeed),
    _Header(_TENSORRT, _bracket, _tensorrt),
    _Header(_SGLANG, _bracket, _sglang),
    _Header(_ISO, _decimal, _iso),
    _Header(_SYSLOG, _upper, _syslog),
    _Header(_DMESG_T, _bracket, _dmesg_t),
    _Header(_DMESG, _bracket, _dmesg),
    _Header(_CLOCK_LEVEL, _bracket, _clock_level),
    _Header(_NCCL_DEBUG, _any, _nccl_debug, needs=" NCCL "),
    _Header(_PYLOGGING, _level_letter, _level_and_origin),
    _Header(_LEVEL_WORD, _any, _level_word),
)
_BY_HEAD_MAX = 4096  # distinct first characters remembered (a bound on hostile input)
_BY_HEAD: dict[str, tuple[_Header, ...]] = {}


def _headers_for(head: str) -> tuple[_Header, ...]:
    """The headers a line starting with `head` can hold, in order; remembered per character."""
    headers = tuple(h for h in _HEADERS if h.starts(head))
    if len(_BY_HEAD) < _BY_HEAD_MAX:
        _BY_HEAD[head] = headers
    return headers
