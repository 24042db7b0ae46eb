"""CUDA errors named in log text: by name (cudaErrorX, CUDA_ERROR_X), by the message
cudaGetErrorString prints, or by number ("CUDA failure 900", "error code 700"); plus the
other shapes a faulting kernel leaves in a log: device-side assertion lines (one per GPU
thread, often hundreds), compute-sanitizer / cuda-memcheck reports and the "execution
failed" statuses of CUDA libraries (cuBLAS, cuDNN, ...).

Messages and codes are those of the CUDA runtime API (driver_types.h); the capture
family 900-910 is what CUDA Graph diagnosis hinges on, the fault family (700, 710, 715,
716, 719, ...) is what kernel-fault diagnosis hinges on, 214 (and legacy 39) is an
uncorrectable ECC error surfacing in the application.

Every wording seen in the wild reaches the same names: torch `RuntimeError` /
`torch.AcceleratorError: CUDA error: <message>`, c10 `what():  CUDA error: ...`, legacy
`cuda runtime error (77) : ...` and `THCudaCheck FAIL ... error=4 : ...`, NCCL's
`Cuda failure 'message'`, TensorFlow/JAX/XLA `CUDA_ERROR_ILLEGAL_ADDRESS: ...`, Triton
`Triton Error [CUDA]: ...`, custom kernels' `Cuda error file.cu:455 'message'`.

Patterns are fixed (ours) and linear: literal-led, bounded repetition.
"""
from __future__ import annotations

import math
import re
from typing import NamedTuple

# (runtime name, code, message printed by cudaGetErrorString)
CUDA_ERRORS = (
    ("cudaErrorInvalidValue", 1, "invalid argument"),
    ("cudaErrorMemoryAllocation", 2, "out of memory"),
    ("cudaErrorInitializationError", 3, "initialization error"),
    ("cudaErrorInsufficientDriver", 35, "CUDA driver version is insufficient for CUDA runtime version"),
    ("cudaErrorDevicesUnavailable", 46, "CUDA-capable device(s) is/are busy or unavailable"),
    ("cudaErrorNoDevice", 100, "no CUDA-capable device is detected"),
    ("cudaErrorInvalidDevice", 101, "invalid device ordinal"),
    ("cudaErrorNoKernelImageForDevice", 209, "no kernel image is available for execution on the device"),
    ("cudaErrorECCUncorrectable", 214, "uncorrectable ECC error encountered"),
    ("cudaErrorNvlinkUncorrectable", 220, "uncorrectable NVLink error detected during the execution"),
    ("cudaErrorInvalidResourceHandle", 400, "invalid resource handle"),
    ("cudaErrorIllegalAddress", 700, "an illegal memory access was encountered"),
    ("cudaErrorLaunchOutOfResources", 701, "too many resources requested for launch"),
    ("cudaErrorLaunchTimeout", 702, "the launch timed out and was terminated"),
    ("cudaErrorAssert", 710, "device-side assert triggered"),
    ("cudaErrorHardwareStackError", 714, "hardware stack error"),
    ("cudaErrorIllegalInstruction", 715, "an illegal instruction was encountered"),
    ("cudaErrorMisalignedAddress", 716, "misaligned address"),
    ("cudaErrorInvalidPc", 718, "invalid program counter"),
    ("cudaErrorLaunchFailure", 719, "unspecified launch failure"),
    ("cudaErrorStreamCaptureUnsupported", 900, "operation not permitted when stream is capturing"),
    ("cudaErrorStreamCaptureInvalidated", 901, "operation failed due to a previous error during capture"),
    ("cudaErrorStreamCaptureMerge", 902, "operation would result in a merge of separate capture sequences"),
    ("cudaErrorStreamCaptureUnmatched", 903, "capture was not ended in the same stream as it began"),
    ("cudaErrorStreamCaptureUnjoined", 904, "capturing stream has unjoined work"),
    ("cudaErrorStreamCaptureIsolation", 905, "dependency created on uncaptured work in another stream"),
    ("cudaErrorStreamCaptureImplicit", 906,
     "operation would make the legacy stream depend on a capturing blocking stream"),
    ("cudaErrorCapturedEvent", 907, "operation not permitted on an event last recorded in a capturing stream"),
    ("cudaErrorStreamCaptureWrongThread", 908,
     "attempt to terminate a thread-local capture sequence from another thread"),
    ("cudaErrorTimeout", 909, "wait operation timed out"),
    ("cudaErrorGraphExecUpdateFailure", 910, "the graph update was not performed because it included "
     "changes which violated constraints specific to instantiated graph update"),
    ("cudaErrorUnknown", 999, "unknown error"),
    # the rest that logs print, for their message alone (cudaGetErrorString)
    ("cudaErrorCudartUnloading", 4, "driver shutting down"),
    ("cudaErrorInvalidConfiguration", 9, "invalid configuration argument"),
    ("cudaErrorInvalidDevicePointer", 17, "invalid device pointer"),
    ("cudaErrorInvalidDeviceFunction", 98, "invalid device function"),
    ("cudaErrorStartupFailure", 127, "startup failure in cuda runtime"),
    ("cudaErrorInvalidKernelImage", 200, "device kernel image is invalid"),
    ("cudaErrorDeviceUninitialized", 201, "invalid device context"),
    ("cudaErrorPeerAccessUnsupported", 217, "peer access is not supported between these two devices"),
    ("cudaErrorInvalidPtx", 218, "a PTX JIT compilation failed"),
    ("cudaErrorUnsupportedPtxVersion", 222, "the provided PTX was compiled with an unsupported toolchain."),
    ("cudaErrorSharedObjectInitFailed", 303, "shared object initialization failed"),
    ("cudaErrorOperatingSystem", 304, "OS call failed or operation not supported on this OS"),
    ("cudaErrorIllegalState", 401, "the operation cannot be performed in the present state"),
    ("cudaErrorSymbolNotFound", 500, "named symbol not found"),
    ("cudaErrorContextIsDestroyed", 709, "context is destroyed"),
    ("cudaErrorCooperativeLaunchTooLarge", 720, "too many blocks in cooperative launch"),
    ("cudaErrorNotPermitted", 800, "operation not permitted"),
    ("cudaErrorNotSupported", 801, "operation not supported"),
    ("cudaErrorSystemDriverMismatch", 803, "system has unsupported display driver / cuda driver combination"),
    ("cudaErrorCompatNotSupportedOnDevice", 804, "forward compatibility was attempted on non supported HW"),
)
# Messages too generic to name an error without the "CUDA error: " before them (or a name or code)
_GENERIC = ("cudaErrorMemoryAllocation", "cudaErrorInvalidValue", "cudaErrorUnknown", "cudaErrorInitializationError",
            "cudaErrorTimeout", "cudaErrorHardwareStackError", "cudaErrorCudartUnloading", "cudaErrorContextIsDestroyed",
            "cudaErrorNotPermitted", "cudaErrorNotSupported", "cudaErrorIllegalState",
            "cudaErrorPeerAccessUnsupported")  # SGLang warns with it and falls back to NCCL
_BY_NAME = {name: (name, code) for name, code, _ in CUDA_ERRORS}
_BY_MESSAGE = {msg: (name, code) for name, code, msg in CUDA_ERRORS}
_BY_CODE = {code: (name, code) for name, code, _ in CUDA_ERRORS}
# Driver API spelling: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED -> cudaErrorStreamCaptureUnsupported
_BY_DRIVER_NAME = {re.sub(r"(?<!^)(?=[A-Z])", "_", name[len("cudaError"):]).upper(): (name, code)
                   for name, code, _ in CUDA_ERRORS}
_BY_DRIVER_NAME.update({"CAPTURED_EVENT": _BY_NAME["cudaErrorCapturedEvent"],
                        "ECC_UNCORRECTABLE": _BY_NAME["cudaErrorECCUncorrectable"],
                        "NVLINK_UNCORRECTABLE": _BY_NAME["cudaErrorNvlinkUncorrectable"],
                        "LAUNCH_FAILED": _BY_NAME["cudaErrorLaunchFailure"],      # driver API's own name
                        "INVALID_PC": _BY_NAME["cudaErrorInvalidPc"],
                        "OUT_OF_MEMORY": _BY_NAME["cudaErrorMemoryAllocation"],
                        "NO_BINARY_FOR_GPU": _BY_NAME["cudaErrorNoKernelImageForDevice"]})  # the driver API's 209

_NAME = re.compile(r"\b(cudaError[A-Z]\w+)")
# ROCm/HIP mirrors the runtime API: hipErrorIllegalAddress is cudaErrorIllegalAddress (same
# message, same meaning: the kernel faulted and the context is lost); a few names differ.
_HIP_NAME = re.compile(r"\bhipError([A-Z]\w{2,40})")
_HIP_ALIASES = {"ECCNotCorrectable": "ECCUncorrectable", "LaunchTimeOut": "LaunchTimeout",
                "OutOfMemory": "MemoryAllocation",
                "NoBinaryForGpu": "NoKernelImageForDevice",  # no code object for this GPU's architecture
                "InvalidKernelFile": "InvalidKernelImage"}
# The ROCm (HSA) runtime's own report of a GPU page fault, printed before it aborts the process:
# "Memory access fault by GPU node-2 (Agent handle: 0x..) on address 0x... Reason: Page not present ..."
_HSA_FAULT = re.compile(r"Memory access fault by GPU node-?(\d{1,4})(?: \(Agent handle: [0-9a-fx]{1,20}\))?"
                        r"(?: on address ([0-9a-fx]{1,20}|\(nil\)))?\.?(?: ?Reason: ?([^.\n]{1,80}))?")
_HSA_STATUS = re.compile(r"\bHSA_STATUS_ERROR_(MEMORY_APERTURE_VIOLATION|MEMORY_FAULT|EXCEPTION|ILLEGAL_INSTRUCTION)\b")
# cuda-gdb stops the program on the faulting warp: "CUDA Exception: Warp Illegal Address",
# "Program received signal CUDA_EXCEPTION_5, Warp Out-of-range Address."
_GDB_EXCEPTION = re.compile(r"(?:CUDA Exception: |received signal CUDA_EXCEPTION_\d{1,2}, )((?:Warp|Lane|Device) "
                            r"[A-Za-z -]{3,40}?)\.?\s*$")
_DRIVER_NAME = re.compile(r"\bCUDA_ERROR_([A-Z_]+)")
_CODE = re.compile(r"\bCUDA (?:failure|error) (\d{1,4})\b|\berror code[ =:]+(\d{3})\b|CudaAPIError: \[(\d{1,4})\]")
# NCCL quotes cudaGetErrorString whole ("Cuda failure 'invalid argument'", "Cuda failure 2 'out of
# memory'"): inside those quotes even the generic messages name their error
_QUOTED = re.compile(r"\bCuda failure (?:\d{1,4} )?'([^'\n]{3,120})'|"
                     # CUDA extensions' CUDACHECK: "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:455 'invalid argument'"
                     r"\b(?:Cuda|CUDA|cuda) error [^\s']{1,200}:\d{1,6} '([^'\n]{3,120})'")
# Messages that only make sense as CUDA errors ("out of memory", "invalid argument" and
# "unknown error" are too generic to recognise without a name or code).
_MESSAGES = [(msg, _BY_NAME[name]) for name, _, msg in CUDA_ERRORS if name not in _GENERIC]
# After "CUDA error: " (torch, ggml, TensorRT, numba ...) a message is cudaGetErrorString's, generic ones
# included; the longest first, as "operation not permitted" begins "... when stream is capturing".
# (An out-of-memory message is the OOM parsers', as before.)
_PREFIXED_MESSAGES = sorted(((msg, _BY_NAME[name]) for name, _, msg in CUDA_ERRORS
                             if name != "cudaErrorMemoryAllocation"), key=lambda m: -len(m[0]))
# ("CUDA error: ", "CUDA error 9: ", "cuda runtime error (9) : ", CUDA extensions' "CUDA kernel failed : ")
_PREFIXED = re.compile(r"\b(?:CUDA|Cuda|cuda) (?:runtime )?(?:error|kernel failed)(?: \d{1,4}| \(\d{1,4}\))? ?: ?'?"
                       r"([A-Za-z][^\n']{2,160})")

# A kernel faulted: the context is lost and every later call in the process fails too.
FAULTS = {
    "cudaErrorIllegalAddress": "illegal memory access",
    "cudaErrorAssert": "device-side assert",
    "cudaErrorLaunchFailure": "unspecified launch failure",
    "cudaErrorIllegalInstruction": "illegal instruction",
    "cudaErrorMisalignedAddress": "misaligned address",
    "cudaErrorHardwareStackError": "hardware stack error",
    "cudaErrorInvalidPc": "invalid program counter",
    "cudaErrorLaunchTimeout": "kernel ran past the launch timeout (display watchdog)",
}
ECC_ERRORS = {"cudaErrorECCUncorrectable"}
# Library statuses that mean "the library's kernel failed on the GPU", as opposed to bad
# arguments or allocation failures.
# (MAPPING_ERROR: the library's kernel could not access GPU memory, as after an illegal address)
_LIBRARY_EXEC = re.compile(r"\b(CUBLAS_STATUS_EXECUTION_FAILED|CUBLASLT?_STATUS_EXECUTION_FAILED|"
                           r"CUBLAS_STATUS_MAPPING_ERROR|CUDNN_STATUS_MAPPING_ERROR|"
                           r"CUDNN_STATUS_EXECUTION_FAILED|CUSPARSE_STATUS_EXECUTION_FAILED|"
                           r"CUSOLVER_STATUS_EXECUTION_FAILED|CUFFT_EXEC_FAILED|CURAND_STATUS_LAUNCH_FAILURE)\b")
# One line per faulting GPU thread: "<file>:<line>: <kernel>: block: [b], thread: [t] Assertion `c` failed."
# (Intel XPU prints global/local ids instead of block/thread.)
_ASSERT = re.compile(r"(?:block: ?\[(\d{1,9}),(\d{1,9}),(\d{1,9})\], ?thread: ?\[(\d{1,9}),(\d{1,9}),(\d{1,9})\]|"
                     r"global id: ?\[(\d{1,9}),(\d{1,9}),(\d{1,9})\], ?local id: ?\[(\d{1,9}),(\d{1,9}),(\d{1,9})\])"
                     r",? Assertion [`'](.{0,2000}?)[`'] failed")
_ASSERT_ROCM = re.compile(r"Device-side assertion [`'](.{1,2000}?)[`'] failed")   # HIP builds: no block/thread
_ASSERT_SITE = re.compile(r"\.(?:cuh?|cpp|cc|c|h|hpp|py):(\d{1,7}): ")   # the file is the word before it
# compute-sanitizer / cuda-memcheck report headers ("========= Invalid __global__ read of size 4 bytes")
_SANITIZER = re.compile(r"^=+ {1,8}(Invalid __\w{1,10}__ (?:read|write|atomic)\w* of size \d{1,6}(?: bytes?)?|"
                        r"Misaligned (?:Shared or Local |)Address|Out-of-range Shared or Local Address|"
                        r"Invalid PC|Misaligned PC|Invalid Address Space|Hardware Stack Overflow|Illegal Instruction|"
                        r"Warp (?:Illegal|Misaligned|Out-of-range) Address|Warp Hardware Stack Overflow|"
                        r"Warp Illegal Instruction)")
# A message cut by a terminal wrap at the end of the line ("CUDA error: an illegal memory acc")
_CUT_MESSAGE = re.compile(r"CUDA error: ([a-z][a-zA-Z '-]{9,80})$")
_SURFACES = (  # (marker, wording): who printed the error, for the explanation
    ("hipError", "ROCm/HIP"), ("HIP error", "ROCm/HIP"), ("ggml", "llama.cpp (ggml)"),
    ("TensorRT-LLM", "TensorRT-LLM"), ("[TRT]", "TensorRT"),
    ("torch.AcceleratorError", "torch.AcceleratorError"), ("Triton Error", "Triton"),
    ("XlaRuntimeError", "JAX/XLA"), ("INTERNAL:", "XLA"), ("CUDA_ERROR_", "CUDA driver API (TensorFlow/JAX/XLA)"),
    ("what():", "c10::Error"), ("c10::", "c10::Error"), ("cuda runtime error (", "legacy torch (THC)"),
    ("THCudaCheck", "legacy torch (THC)"), ("Cuda failure", "NCCL"), ("NCCL", "NCCL"),
    ("CUDA error:", "torch"),
)

# What a line must contain for classify_cuda_line to match (the line prefilter's words, matched
# case-insensitively; logs.prefilter): keep in step with the patterns above.
CUDA_LINE_WORDS = (
    "ssertion",                                                         # device-side assertions
    "_execution_failed", "_mapping_error", "cufft_exec_failed", "curand_status_launch_failure",  # _LIBRARY_EXEC
    "memory access fault", "hsa_status_error_", "cuda exception: ", "cuda_exception_",
    "cudaerror", "cuda_error_", "hiperror", "cuda failure", "cuda error", "error code", "cudaapierror",
    "cuda runtime error in", "cuda driver error in", "cuda kernel failed",
) + tuple(msg.lower() for msg, _ in _MESSAGES)
CUDA_LINE_STARTS = "="                                                  # compute-sanitizer reports


class Hit(NamedTuple):
    kind: str
    name: str
    attrs: dict
    severity: str = ""
    value: float = math.nan
    unit: str = ""


def find_cuda_error(text: str) -> tuple[str, int] | None:
    """(runtime name, code) of the first CUDA error the text names, or None."""
    m = _NAME.search(text)
    if m and m.group(1) in _BY_NAME:
        return _BY_NAME[m.group(1)]
    m = _DRIVER_NAME.search(text)
    if m and m.group(1) in _BY_DRIVER_NAME:
        return _BY_DRIVER_NAME[m.group(1)]
    m = _HIP_NAME.search(text) if "hipError" in text else None
    if m and f"cudaError{_HIP_ALIASES.get(m.group(1), m.group(1))}" in _BY_NAME:
        return _BY_NAME[f"cudaError{_HIP_ALIASES.get(m.group(1), m.group(1))}"]
    for msg, hit in _MESSAGES:
        if msg in text:
            return hit
    m = _PREFIXED.search(text)
    if m:
        said = m.group(1)
        for msg, hit in _PREFIXED_MESSAGES:
            if said.startswith(msg):
                return hit
    m = _QUOTED.search(text) if "Cuda failure" in text or " error /" in text else None
    if m and (m.group(1) or m.group(2)) in _BY_MESSAGE:
        return _BY_MESSAGE[m.group(1) or m.group(2)]
    m = _CODE.search(text)
    if m:
        code = int(m.group(1) or m.group(2) or m.group(3))  # numba: "CudaAPIError: [700] Call to ..."
        return _BY_CODE.get(code)
    return None


def cuda_error_attrs(hit: tuple[str, int], text: str) -> dict:
    """The attrs every CUDA-error event carries: name and code, a label for explanations,
    what kind of failure it is, and who printed it."""
    name, code = hit
    surface, detail = _surface(text), _first_line_with(text, name, code)
    return {"cuda_error": name, "cuda_code": code, "error_label": f"{name} ({code})",
            "fault": FAULTS.get(name, "uncorrectable ECC error" if name in ECC_ERRORS else ""),
            "category": "kernel_fault" if name in FAULTS else ("ecc" if name in ECC_ERRORS else ""),
            "surface": surface, "detail": detail,
            "summary": f"the application's CUDA call failed with {name} ({code}), reported by {surface or 'the log'}: "
                       f"\"{detail[:200]}\""}


def classify_cuda_line(body: str, faults_only: bool = False) -> Hit | None:
    """A CUDA error line as an event; with `faults_only`, only kernel faults and
    uncorrectable ECC errors (these must win over the NCCL/c10d wrappers that relay them)."""
    if "ssertion" in body and " failed" in body:
        found = parse_device_assert(body)
        if found:
            return Hit("error", "cudaErrorAssert", found, "error", 710.0)
    if body.startswith("="):
        m = _SANITIZER.match(body)
        if m:
            return Hit("error", "ComputeSanitizerError", _sanitizer_attrs(m.group(1)), "error")
    m = _LIBRARY_EXEC.search(body)
    if m:
        return Hit("error", "LibraryExecutionFailed", _library_attrs(m.group(1), body), "error")
    if "Memory access fault" in body or "HSA_STATUS_ERROR_" in body:
        fault = _rocm_fault(body)
        if fault:
            return fault
    if "CUDA Exception: " in body or "CUDA_EXCEPTION_" in body:
        m = _GDB_EXCEPTION.search(body)
        if m:
            return Hit("error", *_debugger_fault(m.group(1), body), "error")
    hit = find_cuda_error(body) or _cut_fault(body)
    if not hit and not faults_only and (report := _runtime_report(body)):
        return report
    if not hit or (faults_only and hit[0] not in FAULTS and hit[0] not in ECC_ERRORS):
        return None
    severity = "critical" if hit[0] in ECC_ERRORS else "error"
    return Hit("error", hit[0], cuda_error_attrs(hit, body), severity, float(hit[1]))


# A wrapper's report of a failed runtime/driver call, whatever its reason: TensorRT-LLM's "CUDA runtime
# error in cudaDeviceGetDefaultMemPool(&memPool, device): operation not supported", a driver "CUDA
# driver error in cuMemMap(...): ...". The reason may be cut (a table cell, a terminal wrap).
_RUNTIME_REPORT = re.compile(r"\bCUDA (?:runtime|driver) error in ([^\n]{1,200}?\)): ?([a-z][a-z ]{1,80})")


def _runtime_report(body: str) -> Hit | None:
    """A failed CUDA call whose reason names no fault we know: still a failure of the program (the
    floor reports it); an out-of-memory reason is the OOM parsers'."""
    m = _RUNTIME_REPORT.search(body)
    call, reason = (m.group(1), m.group(2).strip()) if m else ("", "")
    if not m and (said := _PREFIXED.search(body)) and said.group(1)[:1].islower():
        m, reason = said, said.group(1).strip().rstrip(".")  # "CUDA error: <a message no table knows>"
    if not m or reason.startswith("out of mem"):
        return None
    known = {hit for _, code, msg in CUDA_ERRORS for hit in [_BY_CODE[code]] if msg.startswith(reason)}
    name, code = known.pop() if len(known) == 1 else ("CUDARuntimeError", 0)
    attrs = {"cuda_error": name, "cuda_code": code or None, "call": call[:200], "reason": reason[:160],
             "error_label": f"{name} ({code})" if code else f"CUDA call failed: {reason[:160]}",
             "fault": FAULTS.get(name, ""), "category": "kernel_fault" if name in FAULTS else "",
             "surface": _surface(body), "detail": m.group(0)[:240],
             "summary": f"the CUDA call {call[:120]} failed: {reason[:160]}" if call
                        else f"a CUDA call failed: {reason[:160]}"}
    return Hit("error", name, attrs, "error", float(code) if code else math.nan)


def _cut_fault(body: str) -> tuple[str, int] | None:
    """A fault or ECC message cut short at the end of the line by a wrap: its prefix still names it."""
    m = _CUT_MESSAGE.search(body.rstrip())
    if not m:
        return None
    text = m.group(1)
    return next((hit for msg, hit in _MESSAGES if (hit[0] in FAULTS or hit[0] in ECC_ERRORS)
                 and msg.startswith(text)), None)


def _rocm_fault(body: str) -> Hit | None:
    """The ROCm runtime's GPU page fault / hardware exception: the HIP form of an illegal address."""
    m = _HSA_FAULT.search(body)
    status = _HSA_STATUS.search(body) if m is None else None
    if m is None and status is None:
        return None
    name = "cudaErrorIllegalInstruction" if status and status.group(1) == "ILLEGAL_INSTRUCTION" else (
        "cudaErrorLaunchFailure" if status and status.group(1) == "EXCEPTION" else "cudaErrorIllegalAddress")
    attrs = cuda_error_attrs(_BY_NAME[name], body)
    if m:
        where = f" on address {m.group(2)}" if m.group(2) else ""
        reason = f" ({m.group(3).strip()})" if m.group(3) else ""
        attrs |= {"gpu_node": int(m.group(1)), "fault_address": m.group(2) or "", "fault_reason": (m.group(3) or "").strip(),
                  "error_label": f"ROCm memory access fault (HIP equivalent of {name})",
                  "detail": f"the GPU (HSA node {m.group(1)}) faulted{where}{reason}"}
    elif status:
        attrs |= {"error_label": f"HSA_STATUS_ERROR_{status.group(1)} (ROCm; like {name})"}
    attrs["surface"] = "ROCm (HSA runtime)"
    return Hit("error", name, attrs, "error", float(_BY_NAME[name][1]))


def _debugger_fault(exception: str, body: str) -> tuple[str, dict, str, float]:
    """cuda-gdb's name for the exception -> (event name, attrs, severity, code)."""
    e = exception.lower()
    name = ("cudaErrorMisalignedAddress" if "misaligned address" in e else
            "cudaErrorIllegalInstruction" if "instruction" in e else
            "cudaErrorAssert" if "assert" in e else
            "cudaErrorHardwareStackError" if "stack" in e else
            "cudaErrorInvalidPc" if " pc" in e else "cudaErrorIllegalAddress")
    attrs = cuda_error_attrs(_BY_NAME[name], body) | {
        "debugger_exception": exception.strip(), "surface": "cuda-gdb",
        "error_label": f"cuda-gdb: {exception.strip()}", "detail": f"cuda-gdb stopped on {exception.strip()}"}
    return name, attrs, "error", float(_BY_NAME[name][1])


def parse_device_assert(body: str) -> dict | None:
    """Device-side assertion lines (one or several on a line): where, which condition, how many threads."""
    matches = list(_ASSERT.finditer(body))
    if not matches:
        rocm = _ASSERT_ROCM.search(body) if "Device-side assertion" in body else None
        if rocm is None:
            return None
        site = _assert_site(body[max(0, rocm.start() - 600):rocm.start()])
        return _assert_attrs(rocm.group(1), [], [], (site[0], site[1], ""), 1, 1)  # HIP prints no kernel name
    first = matches[0]
    g = first.groups()
    block = [int(x) for x in (g[0:3] if g[0] is not None else g[6:9])]
    thread = [int(x) for x in (g[3:6] if g[3] is not None else g[9:12])]
    site = _assert_site(body[max(0, first.start() - 600):first.start()])
    return _assert_attrs(g[12], block, thread, site, len(matches),
                         len({m.group(0).split("]", 1)[0] for m in matches}))


def _assert_attrs(condition: str, block: list, thread: list, site: tuple, threads: int, blocks: int) -> dict:
    condition = condition.strip()
    attrs = {"assert_condition": condition, "assert_file": site[0], "assert_line": site[1],
             "assert_kernel": site[2], "block": block, "thread": thread, "assert_threads": threads,
             "assert_blocks": blocks}
    return attrs | assert_summary(attrs) | {"cuda_error": "cudaErrorAssert", "cuda_code": 710,
                                             "error_label": "cudaErrorAssert (710)", "fault": FAULTS["cudaErrorAssert"],
                                             "category": "kernel_fault", "surface": "device-side assertion"}


def assert_summary(attrs: dict) -> dict:
    """A one-line description of a device-side assert, with the usual cause when the condition says it."""
    where = f"{attrs['assert_file'].replace(chr(92), '/').rsplit('/', 1)[-1]}:{attrs['assert_line']}" \
        if attrs.get("assert_file") else "a kernel"
    kernel = f" in {attrs['assert_kernel']}" if attrs.get("assert_kernel") else ""
    threads = attrs.get("assert_threads", 1)
    detail = (f"device-side assert `{attrs['assert_condition'][:200]}` failed{kernel} ({where}) "
              f"on {threads} GPU thread(s)")
    hint = _assert_hint(attrs["assert_condition"])
    return {"detail": detail + (f"; {hint}" if hint else ""), "assert_hint": hint}


def _assert_hint(condition: str) -> str:
    c = condition.lower()
    if "out of bounds" in c or "srcindex < srcselectdimsize" in c or "idx_dim" in c or "index <" in c:
        return "an index tensor holds a value outside the indexed dimension (e.g. a token id >= vocab size)"
    if "n_classes" in c or "t >= 0 && t < n_classes" in c or "cur_target" in c:
        return "a class label is outside [0, num_classes)"
    if "target_val" in c or "input_val" in c:
        return "a loss input or target is outside its valid range (e.g. BCE targets not in [0, 1])"
    if "inf" in c or "nan" in c or "probability" in c:
        return "probabilities contain inf/NaN or negative values"
    return ""


def _assert_site(before: str) -> tuple[str, int | None, str]:
    """(file, line, kernel) printed before `block: [...]`: the last `file:line: ` and what follows it."""
    site = None
    for site in _ASSERT_SITE.finditer(before):
        pass
    if site is None:
        return "", None, ""
    words = before[:site.start()].rsplit(None, 1)
    path = (words[-1] if words else "") + site.group(0).split(":", 1)[0]
    kernel = before[site.end():].strip().rstrip(":").strip()
    return path, int(site.group(1)), kernel[:200]


def _sanitizer_attrs(report: str) -> dict:
    illegal = report.startswith(("Invalid __", "Out-of-range", "Invalid Address", "Warp Illegal Address",
                                 "Warp Out-of-range"))
    name = "cudaErrorIllegalAddress" if illegal else (
        "cudaErrorMisalignedAddress" if "Misaligned" in report and "PC" not in report else "cudaErrorLaunchFailure")
    code = _BY_NAME[name][1]
    return {"sanitizer_report": report, "cuda_error": name, "cuda_code": code,
            "error_label": f"compute-sanitizer: {report}", "fault": FAULTS[name], "category": "kernel_fault",
            "surface": "compute-sanitizer", "detail": f"compute-sanitizer reported {report}"}


def _library_attrs(status: str, body: str) -> dict:
    library = status.split("_", 1)[0].replace("CUBLASLT", "cuBLASLt").replace("CUBLAS", "cuBLAS") \
        .replace("CUDNN", "cuDNN").replace("CUSPARSE", "cuSPARSE").replace("CUSOLVER", "cuSOLVER") \
        .replace("CUFFT", "cuFFT").replace("CURAND", "cuRAND")
    call = re.search(r"when calling `(\w{1,60})", body)
    detail = f"{library} returned {status}" + (f" from {call.group(1)}" if call else "")
    return {"library": library, "library_status": status, "cuda_error": status, "cuda_code": None,
            "error_label": status, "fault": f"{library} kernel failed to execute", "category": "kernel_fault",
            "surface": _surface(body), "detail": detail}


def _surface(text: str) -> str:
    return next((who for marker, who in _SURFACES if marker in text), "")


def _first_line_with(text: str, name: str, code: int) -> str:
    """The line of `text` that says the error, trimmed (evidence for the explanation)."""
    needles = [name, name.replace("cudaError", "")] + [m for m, h in _MESSAGES if h[0] == name]
    for line in text.splitlines():
        if any(n and n in line for n in needles) or f" {code}" in line:
            return line.strip()[:300]
    return text.strip().splitlines()[0][:300] if text.strip() else ""
