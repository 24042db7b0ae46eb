"""CUDA errors named by cudaGetErrorString's message alone, in the wrappers' words: torch's "CUDA error:
<message>", ggml's, a CUDA extension's "CUDA kernel failed : <message>", legacy torch's "cuda runtime
error (9) : <message>", ONNX Runtime's "CUDA error cudaErrorX:<message>". A message no table knows is
still a failed CUDA call (the floor reports it), never silence."""
import pytest

from ingest.engine.parsers.logs.cuda import CUDA_ERRORS, classify_cuda_line

REAL_LINES = [  # (line as posted, error it names)
    # pytorch/pytorch#48573, Dao-AILab/causal-conv1d#48
    ("RuntimeError: CUDA error: invalid configuration argument", "cudaErrorInvalidConfiguration"),
    # zeliu98/CloserLook3D#35 (pointnet2-style extension check)
    ("CUDA kernel failed : invalid configuration argument", "cudaErrorInvalidConfiguration"),
    # open-mmlab/mmdetection#1830 (legacy THC wording)
    ("RuntimeError: cuda runtime error (9) : invalid configuration argument at mmdet/ops/roi_pool/src/"
     "roi_pool_kernel.cu:101", "cudaErrorInvalidConfiguration"),
    # pytorch/ort#116
    ("Status Message: CUDA error cudaErrorInvalidConfiguration:invalid configuration argument",
     "cudaErrorInvalidConfiguration"),
    # llama.cpp on ROCm and CUDA: a kernel built for another architecture, a bad launch argument
    ("CUDA error: invalid device function", "cudaErrorInvalidDeviceFunction"),
    ("0.11.348.725 E CUDA error: invalid argument", "cudaErrorInvalidValue"),
    # a binary with no code for this GPU's architecture, in HIP's words (rocm-arch/tensorflow-rocm#21, rocclr)
    # and the driver API's (Theano/libgpuarray#289)
    ('/build/hip-rocclr/src/HIP-rocm-4.0.0/rocclr/hip_code_object.cpp:120: guarantee(false && "hipErrorNoBinaryForGpu: '
     'Coudn\'t find binary for current devices!")', "cudaErrorNoKernelImageForDevice"),
    ("GpuArrayException: CUDA_ERROR_NO_BINARY_FOR_GPU: no kernel image is available for execution on the device",
     "cudaErrorNoKernelImageForDevice"),
    # CUDA extensions' CUDACHECK: "Failed: Cuda error <file>:<line> '<message>'" (vLLM's custom all-reduce,
    # vllm-project/vllm OLMoE -tp 2; DeepEP's internode kernels, a fault)
    ("Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:336 'invalid argument'", "cudaErrorInvalidValue"),
    ('HOST_INTERNODE_DISPATCH_ERROR {"local_rank":3,"error":"Failed: CUDA error /tmp/DeepEP/csrc/kernels/'
     "internode.cu:346 'an illegal memory access was encountered'\"}", "cudaErrorIllegalAddress"),
    # the longest message wins: 900 begins with 800's words
    ("RuntimeError: CUDA error: operation not permitted when stream is capturing", "cudaErrorStreamCaptureUnsupported"),
    ("RuntimeError: CUDA error: operation not permitted", "cudaErrorNotPermitted"),
]


@pytest.mark.parametrize("line,name", REAL_LINES)
def test_real_wordings_name_their_error(line, name):
    hit = classify_cuda_line(line)
    assert hit is not None and (hit.kind, hit.name) == ("error", name), hit


@pytest.mark.parametrize("name,code,message", [e for e in CUDA_ERRORS if e[0] != "cudaErrorMemoryAllocation"])
def test_every_known_message_after_cuda_error_names_its_code(name, code, message):
    hit = classify_cuda_line(f"RuntimeError: CUDA error: {message}")
    assert hit is not None and hit.name == name and hit.attrs["cuda_code"] == code


def test_an_unknown_message_is_still_a_failed_cuda_call():
    hit = classify_cuda_line("torch.AcceleratorError: CUDA error: a message from a driver not released yet")
    assert hit is not None and (hit.kind, hit.name, hit.severity) == ("error", "CUDARuntimeError", "error")
    assert hit.attrs["reason"] == "a message from a driver not released yet"


@pytest.mark.parametrize("line", [
    "invalid argument",                                   # generic words without "CUDA error"
    "out of memory",
    'GGML_ASSERT: ggml/src/ggml-cuda.cu:101: !"CUDA error"',  # names no message
    "CUDA error: out of memory",                          # the OOM parsers' (sizes, allocator state)
])
def test_generic_or_oom_lines_are_not_named_here(line):
    assert classify_cuda_line(line) is None
