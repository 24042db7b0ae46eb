"""Logs the corpus copy lacks (cudagraph_abort/errors.log, oom_*/errors.log and server.log
are empty there), written at run time as torch 2.x prints them, plus bad input."""

import pandas as pd
import pytest

from ingest.engine.io import read_head
from ingest.engine.parsers.logs import parser as log
from tests.corpus import corpus
from tests.ingest.parsers.helpers import parse_with

SITE = "/opt/torch/.venv/lib/python3.12/site-packages/torch/cuda/graphs.py"
CAPTURE_LOG = f"""=== capture with .item() inside
Traceback (most recent call last):
  File "/srv/app/gpu_corpus.py", line 171, in scenario_cudagraph
    if z.sum().item() > 0:  # host sync while capturing
       ^^^^^^^^^^^^^^
RuntimeError: CUDA error: operation not permitted when stream is capturing
Search for `cudaErrorStreamCaptureUnsupported' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.


During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/srv/app/gpu_corpus.py", line 169, in scenario_cudagraph
    with torch.cuda.graph(g2):
         ^^^^^^^^^^^^^^^^^^^^
  File "{SITE}", line 265, in __exit__
    self.cuda_graph.capture_end()
  File "{SITE}", line 128, in capture_end
    super().capture_end()
torch.AcceleratorError: CUDA error: operation failed due to a previous error during capture
Search for `cudaErrorStreamCaptureInvalidated' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.

"""
CAP_OOM_LOG = """2026-11-29 08:19:16 ERROR request failed
Traceback (most recent call last):
  File "/srv/app/gpu_corpus.py", line 226, in scenario_oom
    huge = torch.empty(int(4e9), device="cuda")
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 14.90 GiB. GPU 0 has a total capacity of 139.80 GiB of which 130.70 GiB is free. Including non-PyTorch memory, this process has 9.06 GiB memory in use. 8.39 GiB allowed; Of the allocated memory 8.11 GiB is allocated by PyTorch, and 259.80 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
"""
GiB = 2**30


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_capture_abort_tracebacks(tmp_path):
    df, report = parse_with(log, _write(tmp_path, "errors.log", CAPTURE_LOG))
    errors = df[df.kind == "error"].sort_values("loc", key=lambda s: s.str.extract(r"(\d+)")[0].astype(int))
    assert list(errors["name"]) == ["cudaErrorStreamCaptureUnsupported", "cudaErrorStreamCaptureInvalidated"]
    first, second = errors.iloc[0], errors.iloc[1]
    assert first["loc"] == "line 2-10" and first.a["cuda_code"] == 900
    assert first.a["exception"] == "RuntimeError" and first.a["raising_statement"].startswith("if z.sum().item()")
    assert first.a["message"] == "RuntimeError: CUDA error: operation not permitted when stream is capturing"
    assert first.a["frames"] == [{"file": "/srv/app/gpu_corpus.py", "line": 171, "func": "scenario_cudagraph"}]
    assert second.a["cuda_code"] == 901 and second.a["chained_after"] == "line 2-10"
    assert second.a["exception"] == "torch.AcceleratorError" and second.a["during_cuda_graph_capture"]
    start, end = map(int, second["loc"].removeprefix("line ").split("-"))
    assert len(second.a["text"].splitlines()) == end - start + 1  # the whole traceback, one event
    assert (df["name"] == "ChainedException").sum() == 1
    assert report.meta["clock"] == {"domain": "none", "note": "no line carries a wall-clock time"}
    assert (df.ts == 0).all()


def test_process_cap_oom(tmp_path):
    df, report = parse_with(log, _write(tmp_path, "errors.log", CAP_OOM_LOG))
    (oom,) = [r for _, r in df.iterrows() if r.kind == "oom"]
    a = oom.a
    assert oom["name"] == "OutOfMemoryError" and oom["loc"] == "line 2-6"
    for key, gib in (("allowed", 8.39), ("free", 130.70), ("total_capacity", 139.80), ("in_use_by_process", 9.06)):
        assert a[key] / GiB == pytest.approx(gib, abs=0.005), key
    assert a["tried_to_allocate"] == oom.value == round(14.90 * GiB)
    assert a["exception"] == "torch.OutOfMemoryError" and a["frames"][0]["line"] == 226
    assert pd.Timestamp(oom.ts) == pd.Timestamp("2026-11-29 08:19:16")  # from the line before, inherited
    assert report.meta["clock"]["domain"] == "unix"


def test_year_hint_and_severity(tmp_path):
    line = ("[rank0]:[W1129 08:19:20.058407512 Utils.hpp:137] Warning: Environment variable "
            "TORCH_NCCL_TRACE_BUFFER_SIZE is deprecated\n")
    df, report = parse_with(log, _write(tmp_path, "r.log", line), year=2024)
    row = df.iloc[0]
    assert pd.Timestamp(row.ts) == pd.Timestamp("2024-11-29 08:19:20.058407512")
    assert row.severity == "warning" and row.kind == "log"
    assert report.meta["clock"]["year_assumed"] == 2024


def test_xid_and_cudagraph_skip_lines(tmp_path):
    text = ("Nov 29 08:19:30 gpu-node-3 kernel: [12345.678901] NVRM: Xid (PCI:0000:2b:00): 79, pid=1234, "
            "name=python3, GPU has fallen off the bus.\n"
            "W1129 08:19:07.038000 473 torch/_inductor/cudagraph_utils.py:321] [0/0] [__perf_hints] "
            "skipping cudagraphs due to mutated inputs (1 instances). Found from : \n")
    df, _ = parse_with(log, _write(tmp_path, "k.log", text), year=2026)
    xid = df[df["name"] == "Xid"].iloc[0]
    assert xid.kind == "error" and xid.a["xid"] == 79 and xid.a["pci"] == "PCI:0000:2b:00"
    assert xid.host == "gpu-node-3" and xid.a["uptime_s"] == 12345.678901
    skip = df[df["name"] == "CudagraphsSkipped"].iloc[0]
    assert skip.a["reason"].startswith("mutated inputs (1 instances)")


def test_binary_junk_is_not_a_log():
    assert not log.sniff(bytes(range(256)) * 16, "junk.bin")
    assert not log.sniff(b"\x80\x02}q\x00X\x07\x00\x00\x00version", "nccl_trace_rank_0")


def test_invalid_utf8_line_is_replaced_and_warned(tmp_path):
    path = tmp_path / "bad.log"
    path.write_bytes(b"INFO fine\nERROR caf\xe9 \xff broken\nINFO fine again\n")
    assert log.sniff(read_head(path), path.name)
    df, report = parse_with(log, path)
    assert len(df) == 3
    assert any(w.startswith("line 2:") and "UTF-8" in w for w in report.warnings)
    assert "\ufffd" in df[df["loc"] == "line 2"].iloc[0].a["text"]


def test_empty_corpus_logs_parse_to_nothing(corpus_dir):
    for parts in [("h200", "cudagraph_abort", "errors.log"), ("h200", "oom_true_fragmentation", "server.log")]:
        path = corpus(*parts)
        if path.stat().st_size == 0:
            df, _ = parse_with(log, path)
            assert len(df) == 0
