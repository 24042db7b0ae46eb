"""The corpus copy has empty errors.log files; held-out captures carry the tracebacks torch
prints. Rebuild those bundles at run time (corpus trace + the log text) and check the whole
diagnosis: the traceback is the evidence, the follow-on error is a consequence, one cluster."""
import shutil

import pytest

from diagnosis import scenarios
from tests.corpus import CORPUS
from tests.parsers_logs.test_logs_fixtures import CAP_OOM_LOG, CAPTURE_LOG

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not found")


def bundle(tmp_path, scenario, log_name, text):
    folder = tmp_path / scenario
    shutil.copytree(CORPUS / "h200" / scenario, folder)
    (folder / log_name).chmod(0o644)
    (folder / log_name).write_text(text)
    return folder


def test_capture_abort_with_its_traceback(tmp_path):
    report = scenarios.report(bundle(tmp_path, "cudagraph_abort", "errors.log", CAPTURE_LOG))
    by_rule = {f["rule_id"]: f for f in report["findings"]}
    from_log = by_rule["cuda-graph.capture-host-sync"]
    assert from_log["severity"] in ("error", "critical")
    assert any("z.sum().item()" in ev["text"] and ev["artifact"] == "errors.log" for ev in from_log["evidence"])
    invalidated = by_rule["cuda-graph.capture-invalidated"]
    assert invalidated["consequence_of"] is not None
    capture = {c["id"] for c in report["clusters"] if c["root_cause"].startswith("cuda_graph.")}
    assert len(capture) == 1
    cluster = next(c for c in report["clusters"] if c["id"] in capture)
    assert cluster["root_cause"] == "cuda_graph.host_sync_in_capture"
    assert invalidated["id"] in cluster["findings"] and from_log["id"] in cluster["findings"]


def test_per_process_cap_oom_with_its_message(tmp_path):
    report = scenarios.report(bundle(tmp_path, "oom_fragmentation", "errors.log", CAP_OOM_LOG))
    causes = {f["root_cause"] for f in report["findings"]}
    assert "cuda_oom.process_cap" in causes
    assert not causes & {"cuda_oom.capacity", "cuda_oom.fragmentation"}
    cap = next(f for f in report["findings"] if f["root_cause"] == "cuda_oom.process_cap")
    assert "8.39 GiB" in cap["explanation"]


TRUE_FRAGMENTATION_LOG = """2026-11-29 08:55:52,948 ERROR request 17 failed
Traceback (most recent call last):
  File "/srv/app/server.py", line 88, in handle
    out = torch.empty(48 * 2**20, dtype=torch.uint8, device="cuda")
          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 48.00 MiB. GPU 0 has a total capacity of 139.80 GiB \
of which 9.00 MiB is free. Including non-PyTorch memory, this process has 139.78 GiB memory in use. Of the allocated \
memory 41.78 GiB is allocated by PyTorch, and 97.49 GiB is reserved by PyTorch but unallocated. If reserved but \
unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  \
See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
"""


def test_true_fragmentation_with_its_server_log(tmp_path):
    report = scenarios.report(bundle(tmp_path, "oom_true_fragmentation", "server.log", TRUE_FRAGMENTATION_LOG))
    causes = {f["root_cause"] for f in report["findings"]}
    assert "cuda_oom.fragmentation" in causes
    assert not causes & {"cuda_oom.capacity", "cuda_oom.process_cap", "cuda_oom.undetermined"}
    frag = next(f for f in report["findings"] if f["root_cause"] == "cuda_oom.fragmentation")
    assert "97.49 GiB" in frag["explanation"]
    assert any(ev["artifact"] == "server.log" for ev in frag["evidence"])
