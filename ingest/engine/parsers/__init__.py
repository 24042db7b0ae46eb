"""Parser registry and format detection by content.

A parser is one module in a format family's sub-package (kineto/, nsys/, logs/, ...) that meets
the `Parser` Protocol (ingest/engine/parsers/protocol.py: FORMAT, SOURCE, sniff(head, name),
parse(path, sink, report)), checked for every registered module by
tests/ingest/test_parser_contract.py. Helpers of one family live in its package; telemetry.py
serves several families.

Adding a format = one module in its family's package + its dotted name ("family.module") in
PARSERS. Order matters: the first parser whose sniff() says yes wins, so specific formats come
before generic ones (text logs last).
"""
from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Iterator, cast

import re2  # linear time: detection runs on every uploaded file before any parser

from ingest.engine.events import ParseError, excerpt
from ingest.engine.io import HEAD_BYTES, read_head
from ingest.engine.parsers.protocol import Parser

PARSERS = [
    # binary / container formats first
    "nsys.sqlite",
    "nsys.report_files",         # .nsys-rep / .ncu-rep: need NVIDIA's tools, clear message
    "pytorch.flight_recorder",
    "pytorch.memory_snapshot",
    "otlp.protobuf",
    # JSON family
    "kineto.trace",
    "otlp.json_file",
    "pytorch.memory_stats",
    "pytorch.memory_timeline",
    "nvml.jsonl",
    "pytorch.token_latency",
    "logs.nccl_ras_json",        # `ncclras -f json`
    # CSV / text family
    "nvidia_smi.q_xml",          # `nvidia-smi -q -x`: XML, before anything that reads text
    "ncu.csv_export",
    "nvidia_smi.query_csv",
    "nvidia_smi.compute_apps",   # `--query-compute-apps`: per-process memory, with or without a header
    "nvidia_smi.pmon",           # `# gpu pid type sm ...`: per process, before dmon's `# gpu sm ...`
    "nvidia_smi.dmon",
    "nvidia_smi.q",
    "dcgm.exporter",
    "perf.script",
    "perf.trace",
    "perf.bpftrace",
    "logs.parser",               # generic text logs: always last
]


def _load(name: str) -> Parser:
    # a module meets the Protocol structurally; the contract test checks each one
    return cast(Parser, importlib.import_module(f"ingest.engine.parsers.{name}"))


def registered() -> list[Parser]:
    return list(_in_order())


def _in_order() -> Iterator[Parser]:
    """The parser modules in PARSERS order, each imported only when reached: detection stops
    at the first that takes the file (a Kineto trace never imports the log parser's patterns)."""
    for name in PARSERS:
        yield _load(name)


def looks_binary(head: bytes) -> bool:
    if not head:
        return False
    sample = head[:4096]
    if b"\x00" in sample:
        return True
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as e:
        # a multibyte char cut at the end of the sample is fine
        return e.start < len(sample) - 4
    return False


def detect(path: Path, name: str | None = None) -> Parser:
    """The parser module for this file, decided by its content."""
    path = Path(path)
    name = name or path.name
    if path.stat().st_size == 0:
        raise ParseError(name, "byte 0", "a trace, log or dump", got="an empty file")
    head = read_head(path)
    if not head:
        raise ParseError(name, "byte 0", "readable content", got="nothing readable (damaged gzip header?)")
    json_like = bool(_JSON_START.match(head)) and not _text_log_opening_with_brace(head, len(head) < HEAD_BYTES)
    for mod in _in_order():
        if json_like and mod.FORMAT == "log":
            break  # JSON no JSON parser took is an unknown document, not a log
        if mod.sniff(head, name):
            return mod
    if json_like and head.lstrip()[:1] == b"{" and b'"traceEvents"' not in head:
        kineto = _load("kineto.trace")  # leading keys larger than the head: read on for traceEvents
        if kineto.sniff_past_head(path):  # type: ignore[attr-defined]
            return kineto
    if json_like:
        raise ParseError(name, "byte 0", "a known trace format",
                         got=f"a JSON document of an unknown kind ({_json_keys(head)})")
    what = "binary data" if looks_binary(head) else "text"
    raise ParseError(name, "byte 0", "a known trace format",
                     got=f"{what} no parser recognises ({excerpt(head[:17], 16)}; see docs for the supported formats)")


# `{"key"` or `[{`: a JSON document; `[rank0]:[E1129 ...` and `[80746] ...` are log lines
_JSON_START = re2.compile(rb'^\s*(\{\s*("|\})|\[\s*\{)')


def _text_log_opening_with_brace(head: bytes, whole: bool) -> bool:
    """A text log that merely starts with `{`: JSON Lines (one record per line: structured or
    Kubernetes logs) or a pasted JSON message that is not valid JSON (an API error copied from a
    screen). Those go to the log parser; one JSON document, or a big one cut by the head, stays
    an unknown document."""
    lines = [line for line in head.splitlines()[:3] if line.strip()]
    if len(lines) >= 2 and all(_json_value(line) for line in lines[:2]):
        return True
    return whole and not _json_value(head)


def _json_value(text: bytes) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _json_keys(head: bytes) -> str:
    """A hint for the error message: the document's first top-level keys."""
    keys = re2.findall(rb'"([A-Za-z_][A-Za-z0-9_]{0,40})"\s*:', head[:2048])
    return "keys: " + ", ".join(dict.fromkeys(k.decode() for k in keys[:6])) if keys else "no recognisable keys"
