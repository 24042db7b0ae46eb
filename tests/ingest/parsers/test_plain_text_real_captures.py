"""Real captures that no parser reads as data (tests/fixtures/captures/plain_text, see SOURCES.md):
each is read as plain text with a warning on the artifact that says what it looks like, never
silently taken for a log (issue 33). The DTrace outputs open with dtrace's own "matched N probes"
line, as printed."""
from __future__ import annotations

from pathlib import Path

import pytest

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "captures" / "plain_text"


@pytest.mark.parametrize("name, kind", [
    ("nvidia_gpu_exporter_h100_590_nvlink_s_excerpt.txt", "`nvidia-smi nvlink` output"),
    ("nvidia_gpu_exporter_h100_590_load.metrics", "Prometheus exposition text"),
    ("dtrace_creatbyproc_excerpt.txt", "DTrace output"),
    ("dtrace_exec_success_solaris_excerpt.txt", "DTrace output"),
])
def test_the_artifact_says_it_was_read_as_plain_text(parse, name, kind):
    result, _ = parse(CAPTURES / name)
    assert result.format == "log" and not result.error
    assert any(w.startswith("read as plain text") and kind in w for w in result.warnings), result.warnings
