"""The corpus copy has empty errors.log files; held-out captures carry the tracebacks torch
prints. Rebuild those bundles at run time (corpus trace + the log text) and check the whole
diagnosis: the traceback is the evidence, the follow-on error is a consequence, one cluster."""
import shutil

import pytest

from diagnosis.engine import scenarios
from tests.corpus import CORPUS
from tests.ingest.parsers.test_logs_fixtures import CAP_OOM_LOG, CAPTURE_LOG

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


# --- captured on one H200 (torch 2.11): a metrics thread's .item() while the main thread captures
# in global mode; threading.excepthook prints the poller's error, then the main thread's.
TORCH = "/opt/torch/.venv/lib/python3.12/site-packages/torch"
_CUDA_HINTS = """Search for `{name}' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
"""
_MAIN_THREAD_CAPTURE = f"""Traceback (most recent call last):
  File "/srv/app/serve.py", line 67, in <module>
    y = lin(x)
        ^^^^^^
  File "{TORCH}/nn/modules/linear.py", line 134, in forward
    return F.linear(input, self.weight, self.bias)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.AcceleratorError: CUDA error: operation failed due to a previous error during capture
{_CUDA_HINTS.format(name="cudaErrorStreamCaptureInvalidated")}

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/srv/app/serve.py", line 64, in <module>
    with torch.cuda.graph(g, capture_error_mode=mode):
  File "{TORCH}/cuda/graphs.py", line 265, in __exit__
    self.cuda_graph.capture_end()
  File "{TORCH}/cuda/graphs.py", line 126, in capture_end
    super().capture_end()
torch.AcceleratorError: CUDA error: operation failed due to a previous error during capture
{_CUDA_HINTS.format(name="cudaErrorStreamCaptureInvalidated")}"""
OTHER_THREAD_LOG = f"""Exception in thread metrics-poller:
Traceback (most recent call last):
  File "/usr/lib/python3.12/threading.py", line 1073, in _bootstrap_inner
    self.run()
  File "/usr/lib/python3.12/threading.py", line 1010, in run
    self._target(*self._args, **self._kwargs)
  File "/srv/app/serve.py", line 53, in other
    v = torch.ones(4, device="cuda").sum().item()
        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.AcceleratorError: CUDA error: operation not permitted when stream is capturing
{_CUDA_HINTS.format(name="cudaErrorStreamCaptureUnsupported")}
{TORCH}/nn/modules/linear.py:134: UserWarning: gemm_and_bias error: CUBLAS_STATUS_EXECUTION_FAILED when calling cublasLtMatmul with transpose_mat1 1 transpose_mat2 0 m 1024 n 64 k 1024 mat1_ld 1024 mat2_ld 1024 result_ld 1024 abType 0 cType 0 computeType 68 scaleType 0. Will attempt to recover by calling unfused cublas path. (Triggered internally at /pytorch/aten/src/ATen/cuda/CUDABlas.cpp:1765.)
  return F.linear(input, self.weight, self.bias)
{_MAIN_THREAD_CAPTURE}"""
# the same incident logged through Python logging (no excepthook header, no thread in the frames)
LOGGED_THREAD_LOG = f"""2026-12-01 00:44:45,221 INFO [MainThread] engine: capturing decode graph
2026-12-01 00:44:45,462 ERROR [metrics-poller] engine: metrics poll failed
Traceback (most recent call last):
  File "/srv/app/serve.py", line 66, in poll
    z = torch.ones(4, device="cuda").sum().item()
        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.AcceleratorError: CUDA error: operation not permitted when stream is capturing
{_CUDA_HINTS.format(name="cudaErrorStreamCaptureUnsupported")}
2026-12-01 00:44:45,507 ERROR [MainThread] engine: graph capture failed
{_MAIN_THREAD_CAPTURE}"""


def _capture_clusters(report):
    return [c for c in report["clusters"] if c["root_cause"].startswith("cuda_graph.")]


@pytest.mark.parametrize("text", [OTHER_THREAD_LOG, LOGGED_THREAD_LOG], ids=["excepthook", "logging"])
def test_capture_invalidated_by_another_thread_is_one_incident(tmp_path, text):
    path = tmp_path / "worker.log"
    path.write_text(text)
    report = scenarios.report(path)
    (cluster,) = _capture_clusters(report)
    assert cluster["root_cause"] == "cuda_graph.capture_invalidated"
    assert {c["root_cause"] for c in report["clusters"]} == {"cuda_graph.capture_invalidated"}
    by_rule = {f["rule_id"]: f for f in report["findings"]}
    head = by_rule["cuda-graph.capture-invalidated-by-other-thread"]
    assert ".item()" in head["explanation"] and "thread_local" in " ".join(head["recommendations"])
    if text is OTHER_THREAD_LOG:
        assert "metrics-poller" in head["explanation"]
    sync = by_rule["cuda-graph.capture-host-sync"]  # the poller's own error: part of the incident
    assert sync["consequence_of"] is not None and sync["id"] in cluster["findings"]


def test_same_thread_sync_stays_a_host_sync(tmp_path):
    """The corpus shape (the sync, then capture_end's error chained to it) keeps its key."""
    report = scenarios.report(bundle(tmp_path, "cudagraph_abort", "errors.log", CAPTURE_LOG))
    assert "cuda-graph.capture-invalidated-by-other-thread" not in {f["rule_id"] for f in report["findings"]}


CAPTURE_OOM_UNDER_CAP = """2026-12-01 00:43:12 capturing the decode graph for batch 16384
Traceback (most recent call last):
  File "/srv/app/serve.py", line 177, in warm_up
    wide = h.repeat(16, 1)
           ^^^^^^^^^^^^^^^
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 14.90 GiB. GPU 0 has a total capacity of 139.80 GiB of which 138.96 GiB is free. Including non-PyTorch memory, this process has 852.00 MiB memory in use. 8.39 GiB allowed; Of the allocated memory 71.25 MiB is allocated by PyTorch, with 768.00 KiB allocated in private pools (e.g., CUDA Graphs), and 20.75 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)
"""
GRAPHED_CALLABLES_OOM = f"""Traceback (most recent call last):
  File "/srv/app/train.py", line 44, in <module>
    torch.cuda.make_graphed_callables(m, (x,))
  File "{TORCH}/cuda/graphs.py", line 435, in make_graphed_callables
    outputs = torch.utils._pytree.tree_leaves(func(*args))
                                              ^^^^^^^^^^^
  File "/srv/app/train.py", line 41, in forward
    return torch.ones(int(1e9), device="cuda").sum() + x.sum()
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.73 GiB. GPU 0 has a total capacity of 139.80 GiB of which 139.21 GiB is free. Including non-PyTorch memory, this process has 592.00 MiB memory in use. 2.80 GiB allowed; Of the allocated memory 512 bytes is allocated by PyTorch, and 2.00 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)
"""
VLLM_CAPTURE_END_OOM = "".join(f"(VllmWorker rank=3 pid=1090) ERROR 06-05 06:18:13 [multiproc_executor.py:470] {line}\n" for line in [
    '  File "/usr/local/lib/python3.10/site-packages/vllm/compilation/backends.py", line 681, in __call__',
    "    with torch.cuda.graph(cudagraph, pool=self.graph_pool):",
    '  File "/usr/local/lib/python3.10/site-packages/torch/cuda/graphs.py", line 186, in __exit__',
    "    self.cuda_graph.capture_end()",
    '  File "/usr/local/lib/python3.10/site-packages/torch/cuda/graphs.py", line 84, in capture_end',
    "    super().capture_end()",
    "RuntimeError: CUDA error: out of memory"])


@pytest.mark.parametrize("text,reason", [(CAPTURE_OOM_UNDER_CAP, "8.39 GiB"), (GRAPHED_CALLABLES_OOM, "2.80 GiB"),
                                         (VLLM_CAPTURE_END_OOM, "no request size")],
                         ids=["announced-capture-under-cap", "make_graphed_callables", "vllm-capture_end"])
def test_oom_inside_capture_is_one_capture_oom_incident(tmp_path, text, reason):
    path = tmp_path / "worker.log"
    path.write_text(text)
    report = scenarios.report(path)
    assert [c["root_cause"] for c in report["clusters"]] == ["cuda_graph.capture_oom"]
    assert not any(f["root_cause"].startswith("cuda_oom.") for f in report["findings"])
    (finding,) = [f for f in report["findings"] if f["root_cause"] == "cuda_graph.capture_oom"]
    assert reason in finding["explanation"]
    if reason != "no request size":
        assert "per-process memory cap (cuda_oom.process_cap)" in finding["explanation"]


NVIDIA_SMI_THEN_OOM = """Tue Dec  1 00:44:49 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA H200                    On  |   00000000:00:06.0 Off |                    0 |
| N/A   37C    P0             78W /  700W |       0MiB / 143771MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|  No running processes found                                                             |
+-----------------------------------------------------------------------------------------+
Traceback (most recent call last):
  File "/srv/app/load.py", line 90, in <module>
    b = torch.empty(int(30e9), device="cuda")
        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 111.76 GiB. GPU 0 has a total capacity of 139.80 GiB of which 27.53 GiB is free. Including non-PyTorch memory, this process has 112.27 GiB memory in use. Of the allocated memory 111.76 GiB is allocated by PyTorch, and 1.08 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)
"""


def test_log_with_an_nvidia_smi_table_is_still_a_log(tmp_path):
    path = tmp_path / "job.log"
    path.write_text(NVIDIA_SMI_THEN_OOM)
    report = scenarios.report(path)
    assert [a["format"] for a in report["trace"]["artifacts"]] == ["log"]
    assert {c["root_cause"] for c in report["clusters"]} == {"cuda_oom.capacity"}
    table_only = tmp_path / "smi.txt"
    table_only.write_text(NVIDIA_SMI_THEN_OOM.split("Traceback", 1)[0])
    assert scenarios.report(table_only)["trace"]["artifacts"][0]["format"].startswith("nvidia_smi")
