"""Duration and size literals in rules: "10s", "500ms", "1.5m", "2GiB", "64KB"."""
from __future__ import annotations

import re

DURATION_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
               "m": 60_000_000_000, "h": 3_600_000_000_000}
SIZE_BYTES = {"B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
              "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}

_NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
DURATION_RE = re.compile(rf"^\s*{_NUMBER}\s*(ns|us|µs|ms|s|m|h)\s*$")
SIZE_RE = re.compile(rf"^\s*{_NUMBER}\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$")


def parse_duration(text: str) -> int:
    """'500ms' -> 500_000_000 (ns). Raises ValueError naming the accepted units."""
    m = DURATION_RE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a duration like 500ms, 10s, 1m (units: ns, us, ms, s, m, h)")
    return int(round(float(m.group(1)) * DURATION_NS[m.group(2)]))


def parse_size(text: str) -> int:
    """'2GiB' -> 2147483648 (bytes)."""
    m = SIZE_RE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a size like 512MiB or 2GB (units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")
    return int(round(float(m.group(1)) * SIZE_BYTES[m.group(2)]))


def parse_quantity(text: str) -> float | None:
    """A number, a duration (ns) or a size (bytes) from a rule value; None if it is none of them."""
    s = str(text).strip()
    try:
        return float(s)
    except ValueError:
        pass
    for parse in (parse_duration, parse_size):
        try:
            return float(parse(s))
        except ValueError:
            continue
    return None


def human_duration(ns: float) -> str:
    ns = float(ns)
    for unit, scale in (("h", 3.6e12), ("min", 6e10), ("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def human_bytes(n: float) -> str:
    n = float(n)
    for unit, scale in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"
