"""Issue 33, blind round 7: 50 real excerpts from public threads (tests/fixtures/open_world_r7/*/EXPECTED.yaml).

Gathered after rounds 1-6 (tests/acceptance/test_open_world_r3.py), none in the fixtures or the corpus
(checked by URL and by a distinctive line), every file labelled and committed before tracedoc ran on
it. 36 failures over PyTorch, JAX/XLA, TensorFlow, ROCm/HIP, TensorRT/TensorRT-LLM, DeepSpeed, Megatron,
vLLM, SGLang, llama.cpp, NCCL and the driver; 14 healthy look-alikes.

Blind score, `tracedoc diagnose --format json FILE` per file, judged with `assert_diagnosis`:

| family | files | right | wrong | silent | false alarm |
|---|---|---|---|---|---|
| kernel_fault (Triton misaligned address, illegal instruction x3, interleaved asserts) | 6 | 6 | 0 | 0 | - |
| oom (XLA/JAX, TF, HIP, four PyTorch wordings, TRT-LLM, llama.cpp) | 17 | 15 | 2 | 0 | - |
| nccl (socket, IB, PyNCCL init, received dump signal) | 4 | 3 | 1 | 0 | - |
| cuda_graph (capture broken by the NCCL watchdog thread) | 2 | 0 | 2 | 0 | - |
| serving (vLLM KV cache) | 3 | 2 | 1 | 0 | - |
| xid (Xid 13/109, GSP Xid 119 quoted by a tool) | 2 | 2 | 0 | 0 | - |
| floor (failures outside the taxonomy) | 2 | 1 | 0 | 1 | - |
| healthy look-alikes | 14 | 13 | - | - | 1 |
| **all** | **50** | **42 (84 %)** | 6 | 1 | 1 |

Misses, and the general fix for each:
- a legacy OOM wrapped over three lines read as undetermined: an exception message whose PyTorch OOM
  figures do not close yet takes the next unprefixed lines (blocks.Traceback, nccl.record_incomplete),
  joined at the space a logger dropped ("28.08 GiB reserved", not "GiBreserved");
- "787.74 MiB cached" against a 1.12 MiB request with 3.56 MiB free called capacity: free memory too thin
  to count as room decides nothing when the cache alone could hold the request (oom.classify);
- the NCCL watchdog thread's "operation not permitted when stream is capturing" called a host sync in the
  captured code (twice): a capture violation surfaced by the watchdog is another thread's call
  (capture_conflicts), so the capture_invalidated rule heads the incident;
- PyNCCL's "NCCL error: unhandled system error" (ncclGetErrorString of ncclSystemError) left to the floor:
  any NCCL error relaying that string is a transport failure, as c10d's wording already was;
- a vLLM traceback cut before its message, ending in raise_if_cache_size_invalid(...): a traceback without
  an exception line is classified by the statement that raised; vLLM's KV-cache checks raise nothing else;
- TensorRT-LLM's "CUDA runtime error in cudaDeviceGetDefaultMemPool(...): operation no|t supported" inside
  a table cell: silent. Any "CUDA runtime/driver error in <call>: <reason>" is now an error event (its
  reason mapped when a cut prefix names one error only), so the floor reports it.
Missed after round 7, fixed in round 8 (tests/acceptance/test_open_world_r8.py): llama.cpp's 51.7 GiB
compute buffer that failed and was retried without pipeline parallelism, after which the server
initialised: an OOM the program says it retries is held for its next lines and withdrawn
(logs.retried_oom).

After the round-7 fixes: **49 of 50**, 1 false alarm (that one), no silent failure; after round 8's, 50 of 50. The two cuda_graph labels were
written with `absent: host_sync_in_capture`; the house convention for another thread's call (see
h200_open_world capture_other_thread_sync) keeps that 900 error as a linked consequence, so the labels
now say `not_headline` (recorded in each entry) and the blind score counts them wrong.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from diagnosis.engine import scenarios
from ingest.engine.parsers.logs.oom import parse_oom
from rules.engine.features.oom import classify
from tests.acceptance.findings import assert_labelled_file, by_root

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "open_world_r7"


def _cases():
    for expected in sorted(ROOT.glob("*/EXPECTED.yaml")):
        for entry in yaml.safe_load(expected.read_text()) or []:
            marks = [pytest.mark.xfail(reason=entry["xfail"], strict=False)] if entry.get("xfail") else []
            yield pytest.param(expected.parent / entry["file"], entry, id=f"{expected.parent.name}/{entry['file']}",
                               marks=marks)


CASES = list(_cases())


def _report(family: str, name: str) -> dict:
    return scenarios.report(ROOT / family / name)


def test_the_round_is_what_its_docstring_says():
    entries = [c.values[1] for c in CASES]
    assert len(entries) == 50 and all(e["source"].startswith("https://github.com/") for e in entries)
    assert sum(e["root_cause"] == "none" for e in entries) == 14


@pytest.mark.parametrize("path,entry", CASES)
def test_diagnosed_as_labelled(path: Path, entry: dict):
    assert_labelled_file(path, entry)


def test_received_dump_signal_with_nothing_outstanding_is_not_the_rank_behind():
    """Rank 31 got rank 107's dump signal with last enqueued = last completed = 51: it is idle on that
    group, not the missing peer; rank 97's own timeout is the first collective of another group."""
    report = _report("nccl", "nemo_rl_2140_idle_dump_receiver_and_seq1_timeout.log")
    found = by_root(report)
    assert "nccl.timeout.undetermined" in found
    assert "nccl.timeout.peer_missing" not in found and "nccl.timeout.stream_blocked" not in found


@pytest.mark.parametrize("name", ["vllm_2521_watchdog_thread_capturing.log", "physicsnemo_107_ddp_graph_build_watchdog.log"])
def test_capture_error_in_the_watchdog_thread_is_another_threads_call(name: str):
    report = _report("cuda_graph", name)
    heads = [c["root_cause"] for c in report["clusters"]]
    assert heads == ["cuda_graph.capture_invalidated"]
    conflict = next(f for f in report["findings"] if f["root_cause"] == "cuda_graph.capture_invalidated")
    assert "watchdog" in conflict["explanation"] and "cudaEventQuery" in conflict["explanation"]


@pytest.mark.parametrize("name,code", [("triton_1320_inductor_misaligned_address.log", "misaligned address"),
                                       ("triton_10309_warp_misaligned_cuda_gdb.log", "misaligned address"),
                                       ("trtllm_11313_illegal_instruction_forward.log", "illegal instruction")])
def test_kernel_fault_with_another_cuda_error_code_gets_a_finding(name: str, code: str):
    report = _report("kernel_fault", name)
    fault = [f for f in report["findings"] if f["root_cause"] == "cuda.kernel_fault"]
    assert fault and any(code in f["explanation"] for f in fault), [f["explanation"][:200] for f in fault]


def test_legacy_oom_wrapped_over_three_lines_reads_its_figures():
    report = _report("oom", "deepspeed_3312_legacy_oom_wrapped_three_lines.log")
    oom = next(f for f in report["findings"] if f["root_cause"] == "cuda_oom.capacity")
    assert "28.05 GiB" in oom["explanation"] and "198.00 MiB" in oom["explanation"]


def test_cache_larger_than_the_request_is_fragmentation_even_with_a_sliver_free():
    text = ("RuntimeError: CUDA out of memory. Tried to allocate 1.12 MiB (GPU 0; 22.37 GiB total capacity; "
            "15.87 GiB already allocated; 3.56 MiB free; 787.74 MiB cached)")  # neurosim 28, as posted
    cause, reason = classify(parse_oom(text))
    assert cause == "fragmentation", reason
    # and with room on the device beyond the margin it is still a cap, whatever the cache holds
    capped = dict(parse_oom(text), free=4 * 2**30)
    assert classify(capped)[0] == "process_cap"


def test_cli_json_agrees_with_the_report():
    """The blind score was taken with the CLI; one file through it gives the same headline."""
    path = ROOT / "floor" / "trtllm_backend_363_mempool_not_supported_table.log"
    done = subprocess.run([sys.executable, "-m", "cli.main", "diagnose", "--format", "json", str(path)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT.parent.parent.parent)
    report = json.loads(done.stdout)
    assert [c["root_cause"] for c in report["clusters"]] == ["unexplained.failure"]
