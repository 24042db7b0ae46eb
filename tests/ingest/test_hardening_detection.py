"""Format detection runs on every uploaded file before any parser: it matches text in linear
time (RE2), so the hostile headers that held Python's backtracking `re` for seconds (a 16 KB
perf-script sample header: 4.9 s, a 65 KB nvidia-smi CSV header unit: 11 s on this machine,
14 s in the probe) are detected, or refused, at once."""
from __future__ import annotations

import importlib
import itertools
import re
import time

import pytest

from ingest.engine.io import HEAD_BYTES
from ingest.engine.parsers import PARSERS, detect, registered

pytestmark = pytest.mark.timeout(120)

BOUND_S = 1.0  # generous: each of these takes well under 10 ms with linear-time matching

# Patterns of the detection modules kept on Python's `re`, with why each is linear. The log
# parsers (logs.*) are another package's and are held to the timing test below only.
NOT_RE2 = {
    ("dcgm.exporter", "_LABEL"): "parse only (labels of one sample); the look-behind keeps findall linear",
}


def perf_header_16kb() -> bytes:
    """A `perf script` sample header whose command name is one long run of blanks: the
    header pattern `^(\\S.*?)\\s+(-?\\d+)...` tried every split of the run (quadratic)."""
    first = b"a" + b" " * (16 * 1024 - 8) + b"x"
    return first + b"\nb 1 [0] 1.0: cycles:\n"


def nvidia_smi_csv_header_65kb() -> bytes:
    """A query-CSV header cell that never closes its unit bracket: `^([^\\[]+?)\\s*\\[...\\]$`
    retried the blank run from every position (quadratic)."""
    return b"timestamp, memory.used" + b" " * (65 * 1024 - 40) + b"x, utilization.gpu\n"


@pytest.mark.parametrize("name,content", [("perf.txt", perf_header_16kb()),
                                          ("smi.csv", nvidia_smi_csv_header_65kb())])
def test_the_probes_hostile_headers_are_detected_at_once(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    start = time.monotonic()
    try:
        detect(path, name)
    except Exception:  # refused as unknown text or taken by the log parser: either is fine
        pass
    assert time.monotonic() - start < BOUND_S


def test_detection_patterns_are_re2():
    """The algorithmic property, not a timing: no module a file meets during detection holds a
    backtracking pattern (apart from the ones listed with their reason)."""
    backtracking = []
    for name in PARSERS:
        if name.startswith("logs."):
            continue
        module = importlib.import_module(f"ingest.engine.parsers.{name}")
        for attr, value in vars(module).items():
            if isinstance(value, re.Pattern) and (name, attr) not in NOT_RE2:
                backtracking.append(f"{name}.{attr}")
    assert not backtracking, f"patterns on Python's re in detection modules: {backtracking}"
    from ingest.engine import parsers
    assert not any(isinstance(v, re.Pattern) for v in vars(parsers).values())


# The classic pathological shapes: long runs of what a quantifier and the next one both take
# (blanks, digits, word characters, separators), after prefixes that get past each format's
# first test, in one long line, two half-head lines and lines of 8 KB.
UNITS = [" ", "\t", "0", "1 ", "1.", "a", "a ", "a 1 ", "a:", ",", ", ", "[", "=", "x=1 ", "a=b=c ",
         "|", "(", "{", '"', ".", "-", "0x1 "]
PREFIXES = ["", "a", "\t1 a", "timestamp, memory.used", "# gpu pid", "|", "@x[", "[",
            "DCGM_FI_DEV_GPU_UTIL{", "12345678 ", "a 1 [0] 1.0: ", "{", "0.000 ( 0.001 ms): a/1 "]
SUFFIXES = ["", "x", "("]


def _heads():
    for line_bytes in (HEAD_BYTES, HEAD_BYTES // 2, 8192):
        for prefix, unit, suffix in itertools.product(PREFIXES, UNITS, SUFFIXES):
            body = unit * (line_bytes // len(unit))
            line = (prefix + body)[: line_bytes - len(suffix) - 1] + suffix
            yield ((line + "\n") * (HEAD_BYTES // (len(line) + 1) + 1))[:HEAD_BYTES].encode()


def test_every_sniffer_is_fast_on_pathological_heads():
    parsers = registered()
    slow = []
    total = 0.0
    for head in _heads():
        for parser in parsers:
            start = time.monotonic()
            try:
                parser.sniff(head, "upload.log")
            except Exception:
                pass
            took = time.monotonic() - start
            total += took
            if took > BOUND_S:
                slow.append((parser.__name__, round(took, 2), head[:40]))
    assert not slow, slow
    assert total < 60, total  # ~3,000 heads x 23 sniffers
