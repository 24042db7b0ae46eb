"""Hostile inputs built on the spot (decompression bombs, pickles of shared references) and
a parse run in a child process that reports its peak memory (VmHWM), so a test can assert
a bound on what one file may cost a worker."""
from __future__ import annotations

import gzip
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024**2
GIB = 1024**3

# Parses one file the way the CLI does and prints what it cost.
_CHILD = """
import json, sys, time
from pathlib import Path
from ingest.engine.artifact_results import parse_in_memory
started = time.monotonic()
result = parse_in_memory(sys.argv[1], Path(sys.argv[2]))
status = Path("/proc/self/status").read_text()
hwm_kib = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])
print(json.dumps({"error": result.error, "events": result.events, "format": result.format,
                  "seconds": time.monotonic() - started, "peak_mib": hwm_kib / 1024}))
"""


def gzip_of_repeats(path: Path, head: bytes, filler: bytes, total: int, tail: bytes) -> Path:
    """`head` + `total` bytes of `filler` + `tail`, gzipped, without compressing `total` bytes:
    a gzip file may hold several members, read one after the other, so one compressed member
    of 16 MiB of filler is written as often as needed."""
    block = 16 * MIB
    assert total % block == 0 and block % len(filler) == 0
    member = gzip.compress(filler * (block // len(filler)), compresslevel=9)
    with open(path, "wb") as out:
        out.write(gzip.compress(head))
        for _ in range(total // block):
            out.write(member)
        out.write(gzip.compress(tail))
    return path


def shared_reference_snapshot(path: Path, devices: int = 2000, actions: int = 2000) -> Path:
    """A memory snapshot whose every device trace is the same list of the same action: a few
    KB of pickle, devices x actions records once expanded."""
    action = {"action": "alloc", "addr": 1, "size": 512, "stream": 0, "time_us": 1, "frames": []}
    same_actions = [action] * actions
    snapshot = {"segments": [], "device_traces": [same_actions] * devices}
    path.write_bytes(pickle.dumps(snapshot, protocol=4))
    return path


def parse_isolated(name: str, path: Path, timeout: float = 300) -> dict:
    """Parse in a fresh interpreter; returns error, events, format, seconds and peak_mib."""
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tracedoc.settings")
    done = subprocess.run([sys.executable, "-c", _CHILD, name, str(path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])
