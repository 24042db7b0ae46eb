"""A structured capture that no format parser reads reaches the text-log parser; the artifact then
says what it looked like instead of passing for a log without a word (issue 33)."""
import pytest

from diagnosis.engine import scenarios

CASES = {
    "results.csv": ("model, batch size, tokens per s\nllama, 8, 1234.5\nmistral, 8, 1302.1\n", "a CSV table"),
    "nvlink.txt": ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-3f1c2e4a-0000-0000-0000-000000000000)\n"
                   "\t Link 0: 25 GB/s\n\t Link 1: 25 GB/s\n", "`nvidia-smi nvlink` output"),
    "dtrace.txt": ("CPU     ID                    FUNCTION:NAME\n  3  18461                 cudaMalloc:entry\n",
                   "DTrace output"),
}


def _warnings(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    (artifact,) = scenarios.report(path)["trace"]["artifacts"]
    return artifact["format"], artifact["warnings"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_structured_text_says_it_was_read_as_plain_text(tmp_path, name):
    text, kind = CASES[name]
    fmt, warnings = _warnings(tmp_path, name, text)
    assert fmt == "log" and any("read as plain text" in w and kind in w for w in warnings), warnings


def test_a_log_gets_no_such_warning(tmp_path):
    _, warnings = _warnings(tmp_path, "train.log", "2026-12-01 10:00:00,001 INFO step 1, loss 2.3, lr 0.1\n"
                                                   "2026-12-01 10:00:01,001 INFO step 2, loss 2.2, lr 0.1\n")
    assert not any("read as plain text" in w for w in warnings)
