"""An illegal memory access as torch prints it: one kernel-fault finding with the traceback."""
from diagnosis.engine import scenarios

LOG = """Traceback (most recent call last):
  File "/srv/app/train.py", line 41, in step
    loss = model(batch).sum().item()
           ^^^^^^^^^^^^^^^^^^^^^^^^^
RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
"""


def test_illegal_memory_access(tmp_path):
    path = tmp_path / "train.log"
    path.write_text(LOG)
    report = scenarios.report(path)
    faults = [f for f in report["findings"] if f["root_cause"] == "cuda.kernel_fault"]
    assert len(faults) == 1 and faults[0]["severity"] == "error"
    assert "cudaErrorIllegalAddress (700)" in faults[0]["explanation"]
    assert any("illegal memory access" in ev["text"] for ev in faults[0]["evidence"])
    # a kernel fault is not a capture problem
    assert not [f for f in report["findings"] if f["root_cause"].startswith("cuda_graph.")]


def _report(tmp_path, name: str, text: str) -> dict:
    path = tmp_path / name
    path.write_text(text)
    return scenarios.report(path)


def _by_root(report: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in report["findings"]:
        out.setdefault(f["root_cause"], []).append(f)
    return out


def test_device_side_asserts_across_ranks_are_one_incident(tmp_path):
    """Hundreds of per-thread assertion lines, interleaved across ranks, then the RuntimeError:
    one finding that counts the threads and names the condition, the site and the ranks."""
    lines = [f"[rank{r}]:../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], "
             f"thread: [{t},0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed."
             for t in range(64, 128) for r in range(4)]
    lines += ["[rank2]: RuntimeError: CUDA error: device-side assert triggered",
              "[rank2]: Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."]
    report = _report(tmp_path, "train.log", "\n".join(lines) + "\n")
    faults = _by_root(report)["cuda.kernel_fault"]
    assert len(faults) == 1 and faults[0]["severity"] == "error"
    text = faults[0]["explanation"]
    assert "256 GPU thread(s)" in text and "IndexKernel.cu:92" in text and "ranks 0, 1, 2, 3" in text
    assert "index out of bounds" in text
    assert len(report["clusters"]) == 1
    # the evidence keeps a bounded sample of the burst, not 256 lines
    assert all(len(ev["text"]) < 5000 for ev in faults[0]["evidence"])


def test_every_wording_of_a_fault_is_a_kernel_fault(tmp_path):
    wordings = {
        "nccl_watchdog.log": "[rank3]:[E ProcessGroupNCCL.cpp:1182] [Rank 3] NCCL watchdog thread terminated with "
                             "exception: CUDA error: an illegal memory access was encountered\n",
        "xla.log": "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to launch CUDA kernel: fusion_1 with block "
                   "dimensions: 128x1x1: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered.\n",
        "tf.log": "E tensorflow/stream_executor/cuda/cuda_event.cc:29] Error polling for event status: failed to query "
                  "event: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure\n",
        "cublas.log": "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, "
                      "opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`\n",
        "legacy.log": "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCCachingHostAllocator.cpp line=265 error=77 : an "
                      "illegal memory access was encountered\n",
        "triton.log": "RuntimeError: Triton Error [CUDA]: misaligned address\n",
        "sanitizer.log": "========= Invalid __global__ write of size 4 bytes\n=========     at k(float*)+0x70\n",
        "crlf.log": "ERROR 10-01 12:00:01 [x.py:2] torch.AcceleratorError: CUDA error: an illegal instruction was "
                    "encountered\r\n",
    }
    for name, text in wordings.items():  # one file each: reports are cached by path
        found = _by_root(_report(tmp_path, name, text))
        assert "cuda.kernel_fault" in found, (name, sorted(found))
        assert not {"nccl.network_error", "nccl.timeout.undetermined", "gpu.ecc"} & found.keys(), name


def test_uncorrectable_ecc_is_the_cause_of_the_fault_that_follows(tmp_path):
    report = _report(tmp_path, "worker.log",
                     "[rank0]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
                     "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    found = _by_root(report)
    assert found["gpu.ecc"][0]["severity"] == "critical"
    heads = [c for c in report["clusters"] if c["root_cause"] == "gpu.ecc"]
    assert len(heads) == 1 and len(heads[0]["findings"]) == 2        # the fault joined the ECC incident
    assert "cuda.kernel_fault" not in {c["root_cause"] for c in report["clusters"]}
