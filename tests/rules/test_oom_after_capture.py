"""An OOM is a capture OOM when the lines right above it say a graph is being captured, not when
they say a capture is over: torch's capture_end() warns "The CUDA Graph is empty" once it has
ended a capture that recorded nothing, and a later allocation that fails is the workload's."""
from diagnosis.engine import scenarios
from tests.acceptance.findings import by_root

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU 0; 39.59 GiB total capacity; "
       "31.52 GiB already allocated; 36.19 MiB free; 38.15 GiB reserved in total by PyTorch)\n")
EMPTY = ("/usr/lib/python3.10/site-packages/torch/cuda/graphs.py:84: UserWarning: The CUDA Graph is empty. This "
         "usually means that the graph was attempted to be captured on wrong device or stream. (Triggered internally "
         "at ../aten/src/ATen/cuda/CUDAGraph.cpp:208.)\n  super().capture_end()\n")
CAPTURING = "INFO 06-12 10:02:11 model_runner.py:1041] Capturing cudagraphs for decoding.\n"


def _roots(tmp_path, text: str) -> dict:
    log = tmp_path / "run.log"
    log.write_text(text)
    return by_root(scenarios.report(log))


def test_an_oom_after_an_ended_empty_capture_is_not_a_capture_oom(tmp_path):
    found = _roots(tmp_path, EMPTY + OOM)
    assert "cuda_graph.capture_oom" not in found
    assert found.get("cuda_oom.fragmentation") in ("warning", "error")  # 6.6 GiB reserved, unallocated, > 64 MiB


def test_an_oom_under_an_announced_capture_still_is_one(tmp_path):
    assert "cuda_graph.capture_oom" in _roots(tmp_path, CAPTURING + OOM)
