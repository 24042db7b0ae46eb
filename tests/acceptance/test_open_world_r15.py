"""Issue 33, blind round 15: 37 real excerpts from public pages and threads (tests/fixtures/open_world_r15/*/EXPECTED.yaml).

Round 14 found the issue threads of several families exhausted, so this round searched stored public web pages first
(forum threads, blog posts, Q&A and vendor pages) and took the real log text they hold: an NVIDIA developer forum
kernel trace (Xid 62, a halted PMU, Xid 154 "GPU Reset Required"), a PyTorch forum TPU reservation failure, a vLLM forum
start-up log, a blog's H200 vLLM OOM, a blog's NVSwitch node dmesg (SXid 12028, Xid 137, Xid 94), a blog mirror of a
TensorFlow BFC OOM and an issue digest page that prints a vLLM traceback on one line (7 files; most pages on these
errors are generated explainers with made-up output, not used). The other 30 come from GitHub issue threads and
pull-request descriptions no earlier round used: CUDA graph capture (an OOM in vLLM's cudagraph memory profiling, custom
all-reduce failing after capture, a taskflow capturer invalidated), kernel faults (four misaligned addresses, four
device-side index asserts including legacy THC hard-wrapped mid-word), out-of-memory figures (two allocator messages
of torch 2.x, fairseq's caught OOM after an empty-graph warning), torch.compile (an explain() summary with 15 breaks,
recompiles on a mode attribute, a data-dependent Unsupported), a 12-hour watchdog timeout, a DETAIL mismatch whose PR
kept a terminal's wrap as runs of spaces, DataLoader workers killed by SIGKILL and SIGSEGV, and healthy look-alikes
(vLLM and SGLang start-ups, graph capture finishing, a KV override, NCCL's socket fallback, TensorFlow device creation
with the NUMA notice and TF_FORCE_GPU_ALLOW_GROWTH, an "empty CUDA graph" UserWarning). None is in the fixtures or the
corpus (checked by URL, by corpus file name and by each file's distinctive figures and lines); every file was labelled
and committed before tracedoc ran on it. 27 failures, 10 healthy look-alikes. assert_round_manifest now accepts any
https source (pages are not GitHub threads); each source is still unique.

Blind score (`scenarios.report` per file, judged with `assert_diagnosis`), against the labels as committed:

| family | files | right | wrong | silent | false alarm |
|---|---|---|---|---|---|
| cuda_graph (profile_cudagraph_memory OOM, custom all-reduce after capture, taskflow invalidated) | 3 | 1 | 1 | 1 | - |
| kernel_fault (misaligned address x4, indexSelect asserts x3, THC wrapped assert) | 8 | 8 | 0 | 0 | - |
| oom (H200 vLLM, TPU reservable, TF BFC shape, vLLM worker, Fooocus K80, fairseq after empty graph) | 6 | 4 | 2 | 0 | - |
| torch_compile (explain 15 breaks, recompiles, data-dependent Unsupported) | 3 | 3 | 0 | 0 | - |
| gpu_errors (Xid 62 + 154 from a forum, SXid 12028 / Xid 137 / Xid 94 from a blog) | 2 | 2 | 0 | 0 | - |
| nccl (12 h _ALLGATHER_BASE timeout, DETAIL mismatch wrapped by spaces) | 2 | 2 | 0 | 0 | - |
| host (DataLoader worker killed x2, segfault) | 3 | 3 | 0 | 0 | - |
| healthy look-alikes | 10 | 10 | - | - | 0 |
| **all** | **37** | **33 (89.2 %)** | 3 | 1 | 0 |

Failures alone: 23 of 27 (85.2 %). No label was changed after the run. The four misses are strict xfails.

The misses, from the facts:
- cuda_graph/vllm_40937 (expected cuda_graph.capture_oom at error; got unexplained.failure at warning): the digest page
  flattens the traceback into one line, 'File ".../gpu_worker.py", line 381, in determine_available_memory
  cudagraph_memory_estimate = self.model_runner.profile_cudagraph_memory() ... torch.OutOfMemoryError: CUDA out of
  memory. Tried to allocate 1.53 GiB. GPU has a total capacity of 23.00 GiB of which 1.49 GiB is free. Process has
  21.59 GiB memory in use.' The OOM message does not open the line, so no OOM event (and no figures) is made, and the
  profile_cudagraph_memory frame is not read as capture context; the floor quotes the whole line.
- cuda_graph/vllm_49101 (expected unexplained.failure at warning; got nothing): both capture bars reach 100 %, then two
  "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:455 'invalid argument'" lines. That is vLLM's CUDACHECK
  wording around cudaGetErrorString's message for cudaErrorInvalidValue; logs.cuda does not read it as a CUDA error, so
  the floor has no error event and the report is empty.
- oom/aria_24 (expected cuda_oom.capacity; got cuda_oom.fragmentation at error): "Tried to allocate 1.88 GiB ... 1.29
  GiB is free ... 19.02 GiB is allocated by PyTorch, and 1.32 GiB is reserved by PyTorch but unallocated".
  rules.engine.features.oom.classify adds free and cached (2.61 GiB, above the request plus its margin) and calls it
  fragmentation although the cached share is 6 % of the 20.34 GiB reserved (the branch after it would have said
  capacity for so small a share) and neither pool alone holds the request. The label follows the taxonomy's "a large
  share reserved-but-unallocated"; an expert could argue the stranded 1.32 GiB is fragmentation, so this miss is the
  least certain of the four.
- oom/pytorch_93378 (expected cuda_oom.fragmentation at warning; got cuda_graph.capture_oom at error, with fragmentation
  named as its cause): "UserWarning: The CUDA Graph is empty" is emitted by capture_end (the next line is
  "super(CUDAGraph, self).capture_end()"), so the capture had ended; fairseq's "OOM: Ran out of memory ... Tried to
  allocate 64.00 MiB ... 31.52 GiB already allocated; 36.19 MiB free; 38.15 GiB reserved" comes after it. The capture
  context opens on the graphs.py warning instead of closing there.

Right without help: all eight kernel faults (error 716 in a cudaLaunchKernel wrapper and under thrust/CUB, two-line and
four-line PyTorch reports, Indexing.cu asserts at three line numbers, THC's assert hard-wrapped inside "IndexType");
the TPU "Attempting to reserve 5.88G ... 14.74G free, 0B reserved, and 4.62G reservable" as fragmentation; TF's BFC
shape-only OOM as undetermined; the H200 and K80 messages as capacity; taskflow's cudaErrorStreamCaptureInvalidated as
capture_invalidated; explain()'s "Graph Break Count: 15", recompiles keyed on L['self'].mode and a bare Unsupported;
the forum's Xid 62 / 154 and the blog's SXid / Xid 137 / Xid 94 second as gpu.xid; the 12-hour timeout after stray
watchdog frames as undetermined; the DETAIL mismatch with spaces inside words as collective_mismatch; three DataLoader
worker deaths at the floor; and no false alarm on ten healthy excerpts (a W-level TF_FORCE_GPU_ALLOW_GROWTH notice,
"Overriding num_gpu_blocks=0", NET/IB "No device found" with the socket fallback, the empty-graph UserWarning).

Fixed after the round (tests with other wordings in tests/ingest/parsers/test_cuda_error_messages.py and
tests/rules/test_oom_after_capture.py): vllm_49101, as hypothesised below (a CUDA extension's CUDACHECK wording
"Cuda error <file>:<line> '<message>'" is read like NCCL's quoted "Cuda failure '<message>'"); pytorch_93378 (the
"The CUDA Graph is empty" warning right above an OOM says the capture is over). **35 of 37**, 0 false alarms. Left as
strict xfails: vllm_40937 (a traceback flattened into one line by the page that quoted it) and aria_24 (free plus
cached above the request, read as fragmentation: an expert can argue either way, and the label is kept as written).

Fix hypotheses written with the blind score (rules are not changed in a blind round):
- vllm_40937: let logs.lines find "torch.OutOfMemoryError: CUDA out of memory" / "CUDA out of memory. Tried to allocate"
  anywhere in a line (a flattened traceback), and count vLLM's profile_cudagraph_memory / _warmup_and_capture frames as
  capture evidence.
- vllm_49101: read "Failed: Cuda error <file>:<line> '<cudaGetErrorString message>'" (vLLM's and SGLang's custom
  all-reduce CUDACHECK) as a CUDA runtime error in logs.cuda, so the floor reports it.
- aria_24: in classify's free-plus-cached branch, require the cached share to be material (as the branches before and
  after it do) or the cached part alone to hold the request.
- pytorch_93378: treat torch/cuda/graphs.py's "The CUDA Graph is empty" (raised from capture_end) as the end of a
  capture, not evidence that one is in progress.
"""
from __future__ import annotations

from tests.acceptance.findings import blind_round

test_the_round_is_what_its_docstring_says, test_diagnosed_as_labelled = blind_round(
    "open_world_r15", files=37, healthy=10, xfails=2)
