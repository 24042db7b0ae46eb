"""An illegal memory access as torch prints it: one kernel-fault finding with the traceback."""
from diagnosis import scenarios

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
