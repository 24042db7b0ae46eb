"""CUDA runtime errors named in log text: by name (cudaErrorX, CUDA_ERROR_X), by the
message cudaGetErrorString prints, or by number ("CUDA failure 900", "error code 700").

Messages and codes are those of the CUDA runtime API (driver_types.h); the capture
family 900-910 is what CUDA Graph diagnosis hinges on.
"""
from __future__ import annotations

import re

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
    ("cudaErrorInvalidResourceHandle", 400, "invalid resource handle"),
    ("cudaErrorIllegalAddress", 700, "an illegal memory access was encountered"),
    ("cudaErrorLaunchOutOfResources", 701, "too many resources requested for launch"),
    ("cudaErrorLaunchTimeout", 702, "the launch timed out and was terminated"),
    ("cudaErrorAssert", 710, "device-side assert triggered"),
    ("cudaErrorIllegalInstruction", 715, "an illegal instruction was encountered"),
    ("cudaErrorMisalignedAddress", 716, "misaligned address"),
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
)
_BY_NAME = {name: (name, code) for name, code, _ in CUDA_ERRORS}
_BY_CODE = {code: (name, code) for name, code, _ in CUDA_ERRORS}
# Driver API spelling: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED -> cudaErrorStreamCaptureUnsupported
_BY_DRIVER_NAME = {re.sub(r"(?<!^)(?=[A-Z])", "_", name[len("cudaError"):]).upper(): (name, code)
                   for name, code, _ in CUDA_ERRORS}
_BY_DRIVER_NAME.update({"CAPTURED_EVENT": _BY_NAME["cudaErrorCapturedEvent"],
                        "ECC_UNCORRECTABLE": _BY_NAME["cudaErrorECCUncorrectable"],
                        "OUT_OF_MEMORY": _BY_NAME["cudaErrorMemoryAllocation"]})

_NAME = re.compile(r"\b(cudaError[A-Z]\w+)")
_DRIVER_NAME = re.compile(r"\bCUDA_ERROR_([A-Z_]+)")
_CODE = re.compile(r"\bCUDA (?:failure|error) (\d{1,4})\b|\berror code[ =:]+(\d{3})\b")
# Messages that only make sense as CUDA errors ("out of memory", "invalid argument" and
# "unknown error" are too generic to recognise without a name or code).
_MESSAGES = [(msg, _BY_NAME[name]) for name, _, msg in CUDA_ERRORS
             if name not in ("cudaErrorMemoryAllocation", "cudaErrorInvalidValue", "cudaErrorUnknown",
                             "cudaErrorInitializationError", "cudaErrorTimeout")]


def find_cuda_error(text: str) -> tuple[str, int] | None:
    """(runtime name, code) of the first CUDA error the text names, or None."""
    m = _NAME.search(text)
    if m and m.group(1) in _BY_NAME:
        return _BY_NAME[m.group(1)]
    m = _DRIVER_NAME.search(text)
    if m and m.group(1) in _BY_DRIVER_NAME:
        return _BY_DRIVER_NAME[m.group(1)]
    for msg, hit in _MESSAGES:
        if msg in text:
            return hit
    m = _CODE.search(text)
    if m:
        code = int(m.group(1) or m.group(2))
        return _BY_CODE.get(code)
    return None
