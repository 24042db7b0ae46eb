"""The memory settings of a process that parses big traces (CLI, worker pool child)."""
import subprocess
import sys

import pytest


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the settings are Linux-only")
def test_settle_moves_arrow_to_the_system_allocator_and_turns_huge_pages_off():
    code = ("import pyarrow as pa; from ingest.engine import process_memory; process_memory.settle(); "
            "print(pa.default_memory_pool().backend_name); "
            "print(next((l.split()[1] for l in open('/proc/self/status') if l.startswith('THP_enabled')), 'unknown'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "system"
    assert out[1] in ("0", "unknown")  # PR_SET_THP_DISABLE took effect (older kernels do not say)
