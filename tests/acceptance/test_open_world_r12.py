"""Issue 33, blind round 12: 40 real excerpts from public threads (tests/fixtures/open_world_r12/*/EXPECTED.yaml).

Gathered after round 11 (tests/acceptance/test_open_world_r11.py) for frameworks and wordings earlier rounds
covered thinly: TensorRT builder out-of-memory (rtSafe "Cuda Error in allocate: 2", LeafCNode::computeCosts),
JAX/XLA RESOURCE_EXHAUSTED without statistics, DeepSpeed ZeRO OOMs in the legacy PyTorch wordings; kernel faults
inside TensorRT plugins, FlashInfer's TRT-LLM FMHA, vLLM under journald, ROCm HSA aperture violations (old and new
runtime wording), cuBLAS EXECUTION_FAILED statuses; CUDA errors that are not kernel faults (no kernel image,
invalid device function, invalid argument, nvrtc's unknown arch, RCCL/NCCL "Cuda failure 'invalid argument'"),
which belong to the unexplained-failure floor; lost GPUs as the driver, nvidia-smi and GPUd word them and an
old-format Xid 31; an NCCL IB completion error; a wrapped vLLM KV-cache ValueError and an SGLang decode retraction;
rank-prefixed and notebook torch.compile recompile limits. None is in the fixtures or the corpus (checked by URL,
by corpus file name and by distinctive lines; two watchdog excerpts found in the corpus were dropped before the
labels were committed); every file was labelled and committed before tracedoc ran on it. 30 failures, 10
healthy look-alikes.

Blind score (`scenarios.report` per file, judged with `assert_diagnosis`), against the labels as committed:

| family | files | right | wrong | silent | false alarm |
|---|---|---|---|---|---|
| oom (TRT builder x2, JAX/XLA x2, ZeRO legacy wordings: fragmentation x2, capacity) | 7 | 7 | 0 | 0 | - |
| kernel_fault (TRT plugin, FlashInfer FMHA, vLLM journald, HSA aperture x2, cuBLAS x2, torch.cat) | 8 | 7 | 0 | 1 | - |
| floor (no kernel image, invalid device function, invalid argument, nvrtc arch) | 4 | 0 | 2 | 2 | - |
| nccl (IB completion error 12, NCCL and RCCL "Cuda failure 'invalid argument'") | 3 | 1 | 2 | 0 | - |
| xid (old-format Xid 31, RmInitAdapter, nvidia-smi lost device, GPUd Xid 79) | 4 | 4 | 0 | 0 | - |
| serving (wrapped vLLM ValueError, SGLang retraction) | 2 | 2 | 0 | 0 | - |
| compile (rank-prefixed cache_size_limit, notebook CacheLimitExceeded) | 2 | 2 | 0 | 0 | - |
| healthy look-alikes | 10 | 9 | - | - | 1 |
| **all** | **40** | **32 (80 %)** | 4 | 3 | 1 |

Failures alone: 23 of 30 (76.7 %).

Label correction after the run, stated explicitly: the four "wrong" answers are all the right key
(unexplained.failure, the floor, with cuda.kernel_fault and nccl.network_error absent as labelled) at warning,
where this round's author labelled the six unexplained.failure entries at error. That severity was a labelling
mistake against the floor's documented meaning: rules/builtin/unexplained.yaml sets the floor at warning, and
every earlier round labels it so (23 entries). The six entries now say warning; no root cause, no `absent` key
and no other label was changed. With that correction: **36 of 40 (90 %)**, failures 27 of 30 (90 %).

The misses, from the facts (each fixed below; no xfail is left):
- floor/llama_cpp_8504 (expected unexplained.failure; got nothing): "CUDA error: invalid device function" under
  "ggml_cuda_compute_forward: RMS_NORM failed", then 'GGML_ASSERT: ggml/src/ggml-cuda.cu:101: !"CUDA error"' and a
  gdb backtrace. None of these lines becomes an error event: the CUDA line classifier knows a set of runtime
  messages (faults, OOM, no kernel image, ...) and "invalid device function" (98) is not among them; GGML_ASSERT is
  not an error-level line either. With no failure event the floor is silent.
- floor/llama_cpp_25095 (expected unexplained.failure; got nothing): "0.11.348.725 E CUDA error: invalid argument"
  after "SOFT_MAX failed". Same gap: "invalid argument" (cudaErrorInvalidValue, 1) is not a known message. The
  llama.cpp "E" level prefix is not the cause: a known message ("no kernel image") under the same prefix is found.
- kernel_fault/rocm_2153 (expected cuda.kernel_fault; got nothing): the file is sniffed as perf_script output,
  so the log parser never reads it. ROCclr's ":0:rocdevice.cpp :2672: 0696142325 us: 5999 : [tid:0x7f676e4c7640]
  Device::callbackQueue aborting with error : HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION" looks like a perf sample
  header; the same line after any other first line is a cuda.kernel_fault at error, and the newer wording
  (whisper.cpp 3576, "rocdevice.cpp Callback: Queue 0x... aborting") is found.
- false alarm, healthy/dsexamples_310 (expected none; got nccl.network_error at critical): all eight ranks reach
  "Init COMPLETE", then four "NCCL WARN NET/IB : Got async event : client reregistration". The transport pattern
  takes any async event name as an IB failure; a subnet manager's re-registration request is informational.

The fixes, each by the facts rather than the fixture's words (tests with other real wordings in
tests/ingest/parsers/test_cuda_error_messages.py, test_nccl_lines.py and test_perf.py):
- logs.cuda: a message after the wrappers' "CUDA error: ", "CUDA error 9: ", "cuda runtime error (9) : " or a
  CUDA extension's "CUDA kernel failed : " is cudaGetErrorString's, so even the generic ones ("invalid argument")
  name their error there (the longest message first: "operation not permitted when stream is capturing" is 900,
  not 800); 20 more runtime errors are in the table (98 invalid device function, 9 invalid configuration,
  218 PTX JIT, 803 driver mismatch, ...), and a message no table knows after "CUDA error: " is still a failed CUDA
  call (CUDARuntimeError), so the floor reports it rather than nothing. "out of memory" stays the OOM parsers'.
- logs.nccl: the verbs async events that report the fabric changing (client reregistration, port active, LID /
  P_Key / SM / GID change, communication established, ...) are not transport failures; the fatal ones (port
  error, CQ/QP errors, local catastrophic error) still are, in the newer "NET/IB : mlx5_0:1 Got async event"
  and NCCL 1's "IB Got async event" wordings too.
- perf.script sniff: a single-line sample's tail must start with an instruction address (6-16 hex digits) and a
  symbol; "5999 : [tid:...]" after a header-like start is a runtime log.

After the fixes: **40 of 40**, 0 false alarms.

Right without help: the TensorRT builder OOMs as undetermined, both ZeRO fragmentation figures (U above the
request) and the 8.52 GiB capacity case, the wrapped "KV cache (" / "3984)" ValueError, the journald-prefixed and
indented illegal-address lines, cuBLAS status 13 as a kernel fault, the ROCm 7 queue wording, GPUd's "XID 79(...)"
line, "RmInitAdapter failed", and none of the "not a kernel fault" CUDA errors that were reported called one.
"""
from __future__ import annotations

from tests.acceptance.findings import blind_round

test_the_round_is_what_its_docstring_says, test_diagnosed_as_labelled = blind_round(
    "open_world_r12", files=40, healthy=10, xfails=0)
