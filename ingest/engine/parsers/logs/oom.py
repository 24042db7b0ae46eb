"""The CUDA out-of-memory message of PyTorch's caching allocator, every wording since 2020.

Wordings (sizes as torch's format_size prints them: "0 bytes", "396.58 MiB", "22.78 GiB"):
* legacy (<= 2.0): "Tried to allocate R (GPU d; T total capacity; A already allocated;
  F free; Rsv reserved in total by PyTorch)"
* 2.1+: "Tried to allocate R. GPU d has a total capacity of T of which F is free.
  [Including non-PyTorch memory, this process has P memory in use. | Process N has P
  memory in use. ...] [X allowed; ] Of the allocated memory A is allocated by PyTorch,
  [with Q allocated in private pools (e.g., CUDA Graphs), ] and U is reserved by PyTorch
  but unallocated." (2.1 spells "capacty"; ROCm says "HIP out of memory")
* torch <= 1.3: "... A already allocated; F free; C cached)" where C is the cache the tensors
  do not use (reserved-but-unallocated).
Fields the text does not carry (a truncated excerpt) are None and listed in "missing".

Out-of-memory failures that print no allocator figures are OOMs too, with every figure None
(wording says which): "CUDA error: out of memory" (a cudaMalloc/cudaGraphInstantiate that
failed outside the caching allocator, e.g. at capture_end), cudaErrorMemoryAllocation /
CUDA_ERROR_OUT_OF_MEMORY, legacy THC "cuda runtime error (2) : out of memory", cuBLAS/cuDNN
handle or workspace allocation failures (CUBLAS_STATUS_ALLOC_FAILED), JAX/XLA
"RESOURCE_EXHAUSTED: Out of memory while trying to allocate N bytes" and TensorFlow "OOM when
allocating tensor with shape[...] and type T" (request computed from the shape).
Also: NCCL's "Cuda failure 'out of memory'", the CUDA driver/runtime wrappers of other tools
("CUDA driver error: out of memory", "cudaMalloc failed: out of memory", MXNet's "cudaMalloc retry
failed: out of memory", TensorRT's "Error Code 2: OutOfMemory"), torch's cudaMallocAsync backend
("Allocation on device N would exceed allowed memory"), XLA's "Failed to allocate request for", "Out of memory allocating",
"Attempting to reserve X at the bottom of memory ... There are F free" and a BFC allocator's
"ran out of memory trying to allocate X" (unless it says it is not a failure).

`allocator_fact` reads the lines that carry an allocator's figures next to such a message:
TF/XLA "Stats:" blocks (Limit, InUse, ...), cuda_malloc_async's "Free memory/Total memory",
torch cudaMallocAsync's "Currently allocated / Requested / Device limit / Free" lines and
NCCL's "Failed to CUDA calloc N bytes". The feature attaches them to the nearest OOM.
"""
from __future__ import annotations

import re

# A number starts after a non-digit, with bounded digits: searched over a long run of digits, an
# unbounded "\d+" that may start anywhere is quadratic.
_SIZE = r"(?<![\d.])(\d{1,24}(?:\.\d{1,24})? ?(?:bytes|[KMGTP]i?B|B))"
_UNITS = {"bytes": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50, "EiB": 2**60,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15, "EB": 10**18,
          # XLA's HumanReadableNumBytes ("29.49G", "147.64M") is binary
          "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}
_XLA_SIZE = r"(?<![\d.])(\d{1,24}(?:\.\d{1,24})? ?(?:[KMGTP]i?B|[KMGTP]\b|B\b|bytes))"

OOM_MARK = re.compile(r"(?:CUDA|HIP|XPU) out of memory")
# (wording, pattern) of OOMs without allocator figures; searched only when OOM_MARK is absent.
# Bounded gaps ({0,200}) keep the patterns linear on long lines.
_BARE_OOM = (
    ("nccl", re.compile(r"Cuda failure (?:\d{1,4} )?'out of memory'")),
    ("cuda_error", re.compile(r"(?:CUDA|HIP) error: out of memory|cuda runtime error \(2\) : out of memory|"
                              r"\bcudaErrorMemoryAllocation\b|\bCUDA_ERROR_OUT_OF_MEMORY\b|\bhipErrorOutOfMemory\b|"
                              r"CUDA (?:driver|runtime) error(?: in [^\n]{1,200}?)?: out of memory|"
                              # MXNet's pooled storage retries once after releasing its pool ("cudaMalloc retry failed")
                              r"\bcudaMalloc(?:Async|Managed)? (?:retry )?failed: out of memory|"
                              # any CUDA/HIP error report whose reason is "out of memory", whatever sits between:
                              # "CUDA error 2 at ggml-cuda.cu:5509: out of memory", TensorRT's "Cuda Error in
                              # allocate: 2 (out of memory)", "Error Code 1: Cuda Runtime (out of memory)",
                              # "CUDA error 2 allocating 2147747325-byte buffer: out of memory"
                              r"\b(?:CUDA|Cuda|cuda|HIP|hip)[ _]?(?:[Ee]rror|ERROR|[Ff]ailure|Runtime|[Dd]river)\b"
                              r"[^\n]{0,120}?[(:] ?out of memory\b")),
    # the exception class names the failure even when the message is cut ("Allocation on device");
    # an exception line, not "except torch.OutOfMemoryError:" in printed source
    ("torch_async", re.compile(r"Allocation on device \d{1,3} would exceed allowed memory|"
                               r"(?<!except )\btorch\.(?:cuda\.)?OutOfMemoryError: \S")),
    # torch 2.1-2.3 query NVML only while composing the OOM message; where NVML cannot list the
    # processes (MIG slices, some containers) that query's assert replaces the message
    ("nvml_assert", re.compile(r"NVML_SUCCESS == (?:r|DriverAPI::get\(\)->nvmlInit_v2_\(\)) INTERNAL ASSERT FAILED "
                               r"at \"[^\"]{0,300}CUDACachingAllocator\.cpp\"")),
    # accelerate's find_executable_batch_size halved the batch after every OOM down to nothing
    ("batch_search", re.compile(r"No executable batch size found, reached zero")),
    ("library_alloc", re.compile(r"\b(?:CUBLAS|CUBLASLT|CUSPARSE|CUSOLVER|CURAND)_STATUS_ALLOC_FAILED\b|"
                                 r"\bCUDNN_STATUS_ALLOC_FAILED\b|\bCUFFT_ALLOC_FAILED\b")),
    ("tensorrt", re.compile(r"Error Code 2: OutOfMemory|Requested amount of GPU memory \(\d{1,20} bytes\) could not "
                            r"be allocated")),
    ("xla", re.compile(r"(?:RESOURCE_EXHAUSTED|Resource exhausted): (?:Out of memory while trying to allocate|"
                       r"Out of memory allocating|Failed to allocate request for|failed to allocate memory)|"
                       r"Attempting to reserve \S{1,24} at the bottom of memory\. That was not possible|"
                       # any other XLA status of that code that names memory: "RESOURCE_EXHAUSTED: XLA:TPU compile
                       # permanent error. Ran out of memory in memory space vmem."
                       r"(?:RESOURCE_EXHAUSTED|Resource exhausted): [^\n]{0,200}?\b(?:[Rr]an out of memory|"
                       r"[Oo]ut of (?:device )?memory|[Ff]ailed to allocate)")),
    # MIOpen (ROCm's cuDNN): "MIOpen Error: .../handlehip.cpp:70: Memory not available to allocate buffer: 655360000"
    ("miopen", re.compile(r"Memory not available to allocate buffer|miopenStatusAllocFailed")),
    # TF 1.x/2.x report a copy whose GPU destination could not be allocated as "Dst tensor is not initialized"
    ("tensorflow", re.compile(r"OOM when allocating tensor|ResourceExhaustedError:? failed to allocate memory|"
                              r"Dst tensor is not initialized")),
    ("bfc", re.compile(r"Allocator \([^)]{1,60}\) ran out of memory trying to allocate")),
    # ONNX Runtime's arena: "onnxruntime::BFCArena::AllocateRawInternal ... Failed to allocate memory for
    # requested buffer of size 939524096"
    ("onnxruntime", re.compile(r"BFCArena::AllocateRawInternal\b[^\n]{0,160}?Failed to allocate memory for requested "
                               r"buffer of size \d")),
)
_FRAMEWORK = {"miopen": "rocm/miopen", "xla": "jax/xla", "tensorflow": "tensorflow", "nccl": "nccl", "tensorrt": "tensorrt",
              "bfc": "tensorflow/xla (BFC allocator)", "torch_async": "torch", "batch_search": "accelerate",
              "nvml_assert": "torch", "onnxruntime": "onnxruntime"}
# Not failures: BFC's retryable "ran out of memory" warning (the real error follows if there is one),
# and TF/XLA stream_executor growth attempts ("failed to allocate 10.76G (...) from device:
# CUDA_ERROR_OUT_OF_MEMORY", retried smaller) or pinned host buffers ("... on host: ...")
_NOT_A_FAILURE = re.compile(r"The caller indicates that this is not a failure|"
                            r"(?:from device|on host): CUDA_ERROR_OUT_OF_MEMORY")
_XLA_REQUEST = re.compile(r"Out of memory while trying to allocate " + _SIZE)
# (pattern, group holding the request) of the bare wordings that print one
_REQUESTS = (
    re.compile(r"Out of memory (?:while trying to allocate|allocating) " + _SIZE),
    re.compile(r"Failed to allocate request for \S{1,24} \((\d{1,20})B\)"),
    re.compile(r"failed to allocate (\d{1,20}) bytes"),
    re.compile(r"Attempting to reserve " + _XLA_SIZE + r" at the bottom of memory"),
    re.compile(r"ran out of memory trying to allocate \S{1,24} \(rounded to (\d{1,20})\)"),
    re.compile(r"ran out of memory trying to allocate " + _SIZE),
    re.compile(r"Requested amount of GPU memory \((\d{1,20}) bytes\)"),
    re.compile(r"allocating (\d+(?:\.\d+)? MiB) on device \d{1,3}: cudaMalloc failed"),
    re.compile(r"allocating (\d{1,20})-byte buffer"),                      # TensorRT's autotuner
    re.compile(r"Requested size was (\d{1,20}) bytes"),                    # TensorRT's OutOfMemory
    re.compile(r"Memory not available to allocate buffer: (\d{1,20})"),    # MIOpen
    re.compile(r"Failed to allocate memory for requested buffer of size (\d{1,20})"),  # ONNX Runtime's arena
)
# TensorRT's builder skips a tactic whose workspace it cannot allocate and tries the next: not a
# failure unless the build then finds no implementation at all (logs.parser holds it until then)
TACTIC_SKIPPED = re.compile(r"Skipping tactic \S{1,40} due to (?:exception|Myelin error)|"
                            r"(?:GPU memory allocation error|cuda error) during (?:getBestTactic|timeReformat)", re.I)
TRT_BUILD_FAILED = re.compile(r"Could not find any implementation for node|Engine could not be created|"
                              r"Assertion engine ?!= ?nullptr failed|Unable to create engine|"
                              r"Failed to (?:build|create) (?:the )?(?:TensorRT )?engine|buildSerializedNetwork[^\n]{0,80}Error")
_XLA_FREE = re.compile(r"There are " + _XLA_SIZE + r" free, " + _XLA_SIZE + r" reserved,? and " + _XLA_SIZE
                       + r" reservable")
_TF_TENSOR = re.compile(r"OOM when allocating tensor (?:with|of) shape ?\[([\d, ]{0,200})\] and type (\w{1,20})")
_DTYPE_BYTES = {"float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "float64": 8,
                "int32": 4, "int64": 8, "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex64": 8}
_FIELDS = {
    "tried_to_allocate": re.compile(r"Tried to allocate " + _SIZE),
    "total_capacity": re.compile(r"total capac(?:i)?ty of " + _SIZE + r"|" + _SIZE + r" total capacity"),
    "free": re.compile(r"of which " + _SIZE + r" is free|" + _SIZE + r" free\b"),
    "in_use_by_process": re.compile(r"this process has " + _SIZE + r" memory in use"),
    "allowed": re.compile(_SIZE + r" allowed;"),
    "allocated_by_pytorch": re.compile(r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch|"
                                       + _SIZE + r" already allocated"),
    "private_pools": re.compile(r"with " + _SIZE + r" allocated in private pools"),
    "reserved_unallocated": re.compile(r"and " + _SIZE + r" is reserved by PyTorch but unallocated"),
    "reserved_total": re.compile(_SIZE + r" reserved in total by PyTorch"),
    "cached_legacy": re.compile(r"free; " + _SIZE + r" cached\)"),
}
_DEVICE = re.compile(r"\(GPU (\d+);|\bGPU (\d+) has\b")
_OTHER_PROCESS = re.compile(r"Process (\d+) has " + _SIZE + r" memory in use")
_ABOVE_ONE_EB = re.compile(r"Tried to allocate more than 1EB")
_TRUNCATED_TOTAL = re.compile(r"total capac(?:i)?ty of (\d+(?:\.\d+)?)\s*$")


_NUMBER_UNIT = re.compile(r"(\d+(?:\.\d+)?) ?([A-Za-z]+)")


def size_bytes(text: str) -> int:
    """'396.58 MiB' -> bytes (binary units as torch prints them; KB/MB/GB decimal; a bare
    number is bytes)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    m = _NUMBER_UNIT.fullmatch(text)
    assert m is not None  # callers pass what their own patterns read as a size
    return int(round(float(m.group(1)) * _UNITS[m.group(2)]))


def parse_oom(message: str) -> dict | None:
    """The figures of an OOM message in bytes, or None when the text is not one."""
    if not OOM_MARK.search(message):
        return _bare_oom(message)
    text = message.strip().strip("`")
    out: dict = {}
    if _ABOVE_ONE_EB.search(text):  # 2.x prints no number for absurd requests
        out["tried_to_allocate_at_least"] = True
    for key, rx in _FIELDS.items():
        m = rx.search(text)
        value = next((g for g in m.groups() if g), None) if m else None
        out[key] = size_bytes(value) if value else None
    if out["tried_to_allocate"] is None and out.get("tried_to_allocate_at_least"):
        out["tried_to_allocate"] = 2**60
    m = _DEVICE.search(text)
    out["device"] = int(m.group(1) or m.group(2)) if m else None
    others = [{"pid": int(pid), "bytes": size_bytes(size)} for pid, size in _OTHER_PROCESS.findall(text)]
    if others:
        out["other_processes"] = others
    cached = out.pop("cached_legacy")
    if out["reserved_unallocated"] is None and cached is not None:
        out["reserved_unallocated"] = cached
    if out["reserved_unallocated"] is None and out["reserved_total"] is not None \
            and out["allocated_by_pytorch"] is not None:
        # legacy wording gives the reserved total; unallocated is what tensors do not hold
        out["reserved_unallocated"] = max(out["reserved_total"] - out["allocated_by_pytorch"], 0)
        out["reserved_unallocated_derived"] = True
    if out["reserved_total"] is None and out["allocated_by_pytorch"] is not None \
            and out["reserved_unallocated"] is not None:
        out["reserved_total"] = out["allocated_by_pytorch"] + out["reserved_unallocated"]
    m = _TRUNCATED_TOTAL.search(text)
    if m and out["total_capacity"] is None:
        out["total_capacity_text"] = m.group(1)  # the excerpt stops before the unit
    total = out["total_capacity"]
    # seen in the wild (driver system-memory fallback, or bad counters): flag, don't "fix"
    out["counters_exceed_capacity"] = bool(total) and any(
        (out[k] or 0) > total for k in ("allocated_by_pytorch", "reserved_total", "in_use_by_process"))
    out["wording"] = "legacy" if "already allocated" in text or "total capacity;" in text else "2.1+"
    out["framework"] = "torch"
    out["hint_expandable_segments"] = "expandable_segments" in text
    out["missing"] = [k for k in ("tried_to_allocate", "total_capacity", "free", "allocated_by_pytorch",
                                  "reserved_unallocated") if out[k] is None]
    return out


def _bare_oom(message: str) -> dict | None:
    """An OOM without the caching allocator's figures (see the module doc), or None."""
    if _NOT_A_FAILURE.search(message):
        return None
    wording = next((w for w, rx in _BARE_OOM if rx.search(message)), None)
    if wording is None:
        return None
    out: dict = {k: None for k in _FIELDS if k != "cached_legacy"}
    out.update(device=None, counters_exceed_capacity=False, wording=wording, hint_expandable_segments=False,
               framework=_FRAMEWORK.get(wording, "cuda"))
    out["tried_to_allocate"] = _bare_request(message)
    out["batch_search_exhausted"] = wording == "batch_search"
    m = _MIG_PROFILE.search(message)
    if m:
        out["mig_profile"] = m.group(1)
    m = _XLA_FREE.search(message)
    if m:
        out.update(free=size_bytes(m.group(1)), xla_reserved=size_bytes(m.group(2)), reservable=size_bytes(m.group(3)))
    m = _TF_TENSOR.search(message)
    if m:
        dims = [int(d) for d in re.findall(r"\d+", m.group(1))]
        out.update(tensor_shape=dims, tensor_dtype=m.group(2))
        if m.group(2) in _DTYPE_BYTES:
            n = _DTYPE_BYTES[m.group(2)]
            for d in dims:
                n *= d
            out["tried_to_allocate"] = n
    for line in message.splitlines()[1:20]:  # torch's cudaMallocAsync message continues on its own lines
        for key, value in (allocator_fact(line) or {}).items():
            out[key] = out.get(key) if out.get(key) is not None else value
    out["missing"] = [k for k in ("tried_to_allocate", "total_capacity", "free", "allocated_by_pytorch",
                                  "reserved_unallocated") if out.get(k) is None]
    return out


def _bare_request(message: str) -> int | None:
    for rx in _REQUESTS:
        m = rx.search(message)
        if m:
            return size_bytes(m.group(1))
    return None


# --- allocator figures printed on lines of their own ---------------------------------------
# TF/XLA "Stats:" block: one "Name:   number" per line ("Stats: Limit: 0" on the glog line)
_STAT_LINE = re.compile(r"^\s{0,8}(Limit|InUse|MaxInUse|NumAllocs|MaxAllocSize|Reserved|PeakReserved|"
                        r"LargestFreeBlock|bytes_limit|bytes_in_use|peak_bytes_in_use|largest_free_block_bytes):"
                        r"\s{1,40}(\d{1,20})\s*$")
_STATS_HEAD = re.compile(r"\bStats:\s{0,8}Limit:\s{1,40}(\d{1,20})\s*$")
_STAT_KEYS = {"Limit": "limit", "bytes_limit": "limit", "InUse": "in_use", "bytes_in_use": "in_use",
              "MaxInUse": "max_in_use", "peak_bytes_in_use": "max_in_use", "NumAllocs": "num_allocs",
              "MaxAllocSize": "max_alloc_size", "Reserved": "pool_reserved", "PeakReserved": "pool_peak_reserved",
              "LargestFreeBlock": "largest_free_block", "largest_free_block_bytes": "largest_free_block"}
_CUDA_FREE_TOTAL = re.compile(r"Free memory/Total memory: (\d{1,20})/(\d{1,20})")
_NCCL_ALLOC = re.compile(r"Failed to CUDA (?:calloc|malloc|host alloc)(?: async)? (\d{1,20}) bytes")
# torch's cudaMallocAsync backend: "Currently allocated     : 9.43 GiB" ...
_ASYNC_LINES = (
    ("allocated_by_pytorch", re.compile(r"^\s{0,8}Currently allocated\s{0,20}: " + _SIZE)),
    ("tried_to_allocate", re.compile(r"^\s{0,8}Requested\s{0,20}: " + _SIZE)),
    ("total_capacity", re.compile(r"^\s{0,8}Device limit\s{0,20}: " + _SIZE)),
    ("free", re.compile(r"^\s{0,8}Free \(according to CUDA\)\s{0,20}: " + _SIZE)),
    ("allowed", re.compile(r"^\s{0,30}(?:PyTorch limit \(set by user-supplied memory fraction\))?\s{0,20}: " + _SIZE
                           + r"\s*$")),
)


# a MIG slice named anywhere in the log (torch's device name, nvidia-smi -L): "MIG 1g.10gb", "MIG 3g.40gb"
_MIG_PROFILE = re.compile(r"\bMIG[ -](\d{1,2}g\.\d{1,4}gb)\b")

# What a line must contain for parse_oom or allocator_fact to find anything (the line
# prefilter's words, matched case-insensitively; logs.prefilter): keep in step with the patterns.
OOM_WORDS = (
    "out of memory", "cudaerrormemoryallocation", "cuda_error_out_of_memory", "hiperroroutofmemory",
    "allocation on device", "outofmemoryerror", "nvml_success", "no executable batch size", "alloc_failed",
    "outofmemory", "requested amount of gpu memory", "resource_exhausted", "resource exhausted",
    "attempting to reserve", "oom when allocating tensor", "resourceexhaustederror", "ran out of memory",
    "memory not available to allocate", "miopenstatusallocfailed", "dst tensor is not initialized",
    # allocator_fact
    "mig", "limit:", "inuse:", "numallocs:", "maxallocsize:", "reserved:", "largestfreeblock:", "bytes_in_use:",
    "largest_free_block_bytes:", "free memory/total memory:", "failed to cuda ", "currently allocated", "requested",
    "device limit", "free (according to cuda)", "pytorch limit",
)
OOM_STARTS_AFTER_SPACE = ":"   # torch's cudaMallocAsync "allowed" figure line: "   : 10.00 GiB"


def allocator_fact(line: str) -> dict | None:
    """Figures an allocator prints on a line next to its OOM message, or None."""
    if "MIG" in line and (m := _MIG_PROFILE.search(line)):
        return {"mig_profile": m.group(1)}
    m = _STAT_LINE.match(line)
    if m:
        return {_STAT_KEYS[m.group(1)]: int(m.group(2))}
    m = _STATS_HEAD.search(line)
    if m:
        return {"limit": int(m.group(1))}
    m = _CUDA_FREE_TOTAL.search(line)
    if m:
        return {"free": int(m.group(1)), "total_capacity": int(m.group(2))}
    m = _NCCL_ALLOC.search(line)
    if m:
        return {"tried_to_allocate": int(m.group(1))}
    if ":" in line and len(line) < 200:
        for key, rx in _ASYNC_LINES:
            m = rx.match(line)
            if m and (key != "allowed" or "PyTorch limit" in line or line.lstrip().startswith(":")):
                return {key: size_bytes(m.group(1))}
    return None
