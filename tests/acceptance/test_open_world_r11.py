"""Issue 33, blind round 11: 33 real excerpts from public threads (tests/fixtures/open_world_r11/*/EXPECTED.yaml).

Gathered after round 10 (tests/acceptance/test_open_world_r10.py), which its author found too easy, for the
families earlier rounds lacked: CUDA Graph capture errors outside vLLM/SGLang (ONNX Runtime launching its
graph into a caller's capture, DeepEP's unjoined fork, masked_select in an eager capture, dynamo's 901),
torch.compile's cudagraph skip; TensorFlow / XLA / JAX / ONNX Runtime allocator failures; SGLang memory
pools; NCCL watchdog timeouts carrying flight-recorder and desync-debug text (wrapped test output, dump
signals from peers, a recorder stack trace); host stalls as logged. None is in the fixtures or the corpus
(checked by URL and by distinctive lines); every file was labelled and committed before tracedoc ran on
it. 25 failures, 8 healthy look-alikes.

Blind score (`scenarios.report` per file, judged with `assert_diagnosis`):

| family | files | right | wrong | silent | false alarm |
|---|---|---|---|---|---|
| cuda_graph (ORT 900 x2 calls, DeepEP 904, masked_select 900, dynamo 901, cudagraph skip) | 5 | 4 | 1 | 0 | - |
| oom (TF 1.x BFC / XLA / notebook x4, ORT arena, JAX BufferAssignment, cuBLAS+cuDNN alloc) | 7 | 7 | 0 | 0 | - |
| serving (SGLang mem-fraction-static, alloc_req_slots) | 2 | 1 | 1 | 0 | - |
| nccl (wrapped x3, dump signal from a peer, rank ahead, RAS table, recorder stack) | 7 | 4 | 2 | 1 | - |
| host (Keras callback-slower-than-batch x3, profiler table dominated by the DataLoader) | 4 | 0 | 0 | 4 | - |
| healthy look-alikes | 8 | 7 | - | - | 1 |
| **all** | **33** | **23 (69.7 %)** | 4 | 5 | 1 |

Failures alone: 18 of 25 (72 %). The "wrong" answers outside cuda_graph were the unexplained-failure
floor (a warning on a failure no rule explains), so no failure went unreported except the five silent ones.

The misses, from the facts:
- false alarm: TF 1.x's BFC warning wrapped by the reporter's paste, "ran out of memory trying to allocate
  3.90GiB. The" / "caller indicates that this is not a failure": the qualifier sat on the next line, so
  the held OOM was let out as an error (cuda_oom.undetermined). Fixed (logs.retried_oom, logs.parser):
  the allocator's own "indicates that this is not a failure" on a following line turns the held OOM into
  the informational retried event, as a retry notice does; checked again on each line handed on from a
  buffered block, since those lines reach the parser only after the OOM they follow was held.
- SGLang's "alloc_req_slots runs out of memory. Please set a smaller number for `--max-running-requests`"
  (the request-to-token pool, one KV index row per running request) fell to the floor. Fixed
  (logs.serving, variant req_slots_exhausted): serving.kv_cache_insufficient.
- DeepEP's "capturing stream has unjoined work" (904) was headed capture_invalidated, which it is not: a
  fork never joined back before the capture ended is no earlier error and no other thread's call. Fixed
  (cuda-graph.capture-unjoined-fork): cuda_graph.undetermined, the key the taxonomy has for a capture that
  failed for a reason no key names, with an explanation that names the unjoined fork.
- two NCCL records wrapped at 70-80 columns ("[Rank 0] Watchdog" / "caught collective operation timeout:
  ..." and the desync-report failure naming "Timeout rank [0] ... col = RECV") reached only the floor, and
  the Flight Recorder's "Stack trace of the failed collective:" alone was silent. Fixed (logs.c10d_aftermath,
  rules.engine.features.nccl): a record cut right after its opening words stays open until the next unprefixed
  line completes the phrase (up to six lines; the join gives back the space the wrap took, also in "ran
  for" / "N milliseconds"); the desync report's failure and the failed-collective stack (its "#0 <op>"
  frame, or "not found" with the recorder off), which the watchdog prints only after it found a collective
  failed or timed out, stand for the missing timeout record as teardown lines do: nccl.timeout.undetermined.
- the four logged host stalls were silent, since no rule read host time per step from log text (host.*
  came from perf and traces). Fixed (logs.host; host.slow-training-callback, host.input-pipeline-in-profile):
  Keras' callback check becomes an event with the hook's and the batch's times (hook / batch >= 0.95, or the
  older wording's median, which Keras prints only above 0.95x the batch update), and a pasted key_averages
  table's DataLoader row an event with its share of the profiled CPU time (>= 30 %): host.cpu_hotspot.

After the fixes: **33 of 33** (100 %), 0 false alarms; no strict xfails.
"""
from __future__ import annotations

from pathlib import Path

from tests.acceptance.findings import assert_labelled_file, assert_round_manifest, by_root, labelled_cases

import pytest

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "open_world_r11"

CASES = labelled_cases(ROOT, strict_xfail=True)


def test_the_round_is_what_its_docstring_says():
    assert_round_manifest(CASES, files=33, healthy=8, xfails=0)


@pytest.mark.parametrize("path,entry", CASES)
def test_diagnosed_as_labelled(path: Path, entry: dict):
    assert_labelled_file(path, entry)


_BFC = "2017-07-02 15:57:34.382333: W tensorflow/core/common_runtime/bfc_allocator.cc:217]\n"


def test_bfc_not_a_failure_wrapped_below_its_line_stays_quiet(tmp_path):
    from diagnosis.engine import scenarios

    quiet = tmp_path / "quiet.log"
    quiet.write_text(_BFC + " Allocator (GPU_0_bfc) ran out of memory trying to allocate 3.90GiB. The\n"
                     " caller indicates that this is not a failure, but may mean that there \n"
                     "could be performance gains if more memory is available.\nstep 20, loss 0.1\n")
    assert "cuda_oom.undetermined" not in by_root(scenarios.report(quiet))
    # the same wrapped line followed by anything else is still the out-of-memory it says
    loud = tmp_path / "loud.log"
    loud.write_text(_BFC + " Allocator (GPU_0_bfc) ran out of memory trying to allocate 3.90GiB. See\n"
                    " logs for memory state.\nstep 20, loss 0.1\n")
    assert by_root(scenarios.report(loud)).get("cuda_oom.undetermined") == "error"


def test_sglang_request_slot_pool_exhausted_is_kv_cache_insufficient(tmp_path):
    from diagnosis.engine import scenarios

    log = tmp_path / "slots.log"
    log.write_text("[2025-09-13 09:10:02 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                   "RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for "
                   "`--max-running-requests`. self.req_to_token_pool.available_size()=0, num_reqs=8,\n")
    found = by_root(scenarios.report(log))
    assert found.get("serving.kv_cache_insufficient") == "error", found


_OPEN_WORLD = ROOT.parent / "open_world"


def test_unjoined_fork_is_undetermined_and_named_in_other_wordings(tmp_path):
    """cudaErrorStreamCaptureUnjoined (904): a stream forked from the capture was never joined back
    before the capture ended. Not an invalidation by an earlier error or another thread; no key names
    it, so cuda_graph.undetermined with the fork named. Another framework's wording of the same code:
    NVIDIA Warp, https://github.com/NVIDIA/warp/issues/1469."""
    from diagnosis.engine import scenarios

    warp = tmp_path / "warp.log"
    warp.write_text("Warp CUDA error 904: capturing stream has unjoined work\n"
                    "(in function wp_cuda_graph_pause_capture)\n")
    report = scenarios.report(warp)
    found = by_root(report)
    assert found.get("cuda_graph.undetermined") == "error" and "cuda_graph.capture_invalidated" not in found, found
    explained = " ".join(f["explanation"] for f in report["findings"])
    assert "never joined back" in explained and "904" in explained, explained
    # a dependency on uncaptured work in another stream (905) is still the invalidated capture
    isolation = by_root(scenarios.report(_OPEN_WORLD / "cuda_graph" / "vllm_4432_nccl_capture_isolation.log"))
    assert "cuda_graph.capture_invalidated" in isolation, isolation
    # a capture that finished is quiet
    assert not by_root(scenarios.report(_OPEN_WORLD / "cuda_graph" / "vllm_11349_graph_capture_finished.log"))


def _host_stall(tmp_path, name: str, text: str) -> dict:
    from diagnosis.engine import scenarios

    log = tmp_path / name
    log.write_text(text)
    return scenarios.report(log)


def test_keras_callback_slower_than_batch_in_other_wordings(tmp_path):
    """A per-batch callback slower than the batch, in the wordings Keras has printed since 2015: Keras 1's
    "Method on_batch_end() is slow compared to the batch update (0.648300)"
    (https://github.com/keras-team/keras/issues/608, through the warnings module as in
    https://github.com/minimaxir/textgenrnn/issues/134), tf.keras 2.1's "Method (on_train_batch_begin)"
    wrapped before "Check your callbacks." (https://github.com/keras-team/keras/issues/5008), and tf.keras
    2.2's "Callbacks method" glued to a progress bar (https://github.com/tensorflow/tensorflow/issues/37876,
    a comment), here under torch-style rank prefixes and indentation."""
    keras1 = _host_stall(tmp_path, "keras1.log", "UserWarning: Method on_batch_end() is slow compared to the batch "
                         "update (0.296865). Check your callbacks.\n")
    assert by_root(keras1).get("host.cpu_hotspot") == "warning", by_root(keras1)
    assert "`on_batch_end` took 0.296865 s" in keras1["findings"][0]["explanation"]
    wrapped = _host_stall(tmp_path, "tf21.log", "[rank0]:   WARNING: tensorflow:Method (on_train_batch_begin) is "
                          "slow compared to the batch update (0.121552).\n[rank0]:   Check your callbacks.\n")
    assert by_root(wrapped).get("host.cpu_hotspot") == "warning", by_root(wrapped)
    glued = _host_stall(tmp_path, "tf22.log", "Epoch 1/3\n   2/1688 [..............................] - ETA: 6:36 - "
                        "loss: 2.2862 - accuracy: 0.1562WARNING:tensorflow:Callbacks method `on_train_batch_end` is "
                        "slow compared to the batch time (batch time: 0.0027s vs `on_train_batch_end` time: "
                        "0.4677s). Check your callbacks.\n")
    found = [f for f in glued["findings"] if f["root_cause"] == "host.cpu_hotspot"]
    assert found and "0.4677 s against a batch time of 0.0027 s" in found[0]["explanation"], glued["findings"]
    # healthy: the same run's progress lines, and a hook the numbers show faster than the batch
    quiet = _host_stall(tmp_path, "quiet.log", "1688/1688 [==============================] - 5s 3ms/step - loss: "
                        "0.4661 - accuracy: 0.8339 - val_loss: 0.3578 - val_accuracy: 0.8735\n"
                        "WARNING:tensorflow:Callback method `on_train_batch_end` is slow compared to the batch time "
                        "(batch time: 0.0470s vs `on_train_batch_end` time: 0.0130s). Check your callbacks.\n")
    assert not by_root(quiet), by_root(quiet)


_DASH = "-" * 55 + "  " + "  ".join(["-" * 12] * 6) + "  \n"
_HEAD = f"{'Name':>55}  {'Self CPU %':>12}  {'Self CPU':>12}  {'CPU total %':>12}  {'CPU total':>12}  " \
        f"{'CPU time avg':>12}  {'# of Calls':>12}  \n"


def _row(name: str, *cells: str) -> str:
    return f"{name:>55}  " + "  ".join(f"{c:>12}" for c in cells) + "  \n"


def test_profiler_table_dominated_by_the_loader_in_another_layout(tmp_path):
    """The DataLoader's row of a key_averages table holding most of the profiled CPU time, in the
    CPU-only layout PyTorch Lightning's profiler prints (https://github.com/jeremyjordan/midi-lm/pull/7)
    with the loader figures of https://github.com/MLforHealth/ClinicalDG/issues/2, under a `[rank0]:`
    prefix; the same table whose top row is the profiler step itself (midi-lm's own rows: the step, not
    the loader) is quiet."""
    loud = _host_stall(tmp_path, "loud.log", "".join("[rank0]: " + l for l in (
        _DASH, _HEAD, _DASH,
        _row("enumerate(DataLoader)#_MultiProcessingDataLoaderIter...", "88.64%", "78.632s", "89.18%", "79.116s",
             "791.161ms", "100"),
        _row("autograd::engine::evaluate_function: ConvolutionBack...", "0.08%", "68.203ms", "2.76%", "2.445s",
             "407.511us", "6000"), _DASH)) + "Self CPU time total: 88.712s\n")
    found = [f for f in loud["findings"] if f["root_cause"] == "host.cpu_hotspot"]
    assert found and "89.18% of the profiled CPU time" in found[0]["explanation"] and "791.2 ms each" in \
        found[0]["explanation"], loud["findings"]
    healthy = _host_stall(tmp_path, "midi.log", "FIT Profiler Report\nProfile stats for: records\n" + "".join((
        _DASH, _HEAD, _DASH,
        _row("ProfilerStep*", "77.95%", "19.105s", "88.09%", "21.590s", "4.318s", "5"),
        _row("[pl][profile]run_training_batch", "0.00%", "851.000us", "9.84%", "2.412s", "482.324ms", "5"),
        _row("Optimizer.step#AdamW.step", "3.84%", "941.579ms", "9.84%", "2.411s", "482.109ms", "5"), _DASH)))
    assert not by_root(healthy), by_root(healthy)
    # the threshold, not the row's name, decides: a loader row at 2 % of the time (constructed) is quiet
    small = _host_stall(tmp_path, "small.log", "".join((
        _HEAD, _row("[pl][profile][_TrainingEpochLoop].train_dataloader_n...", "0.00%", "1.2ms", "2.01%", "0.492s",
                    "98.4ms", "5"))))
    assert not by_root(small), by_root(small)


def test_watchdog_record_cut_at_its_opening_words_in_another_wording(tmp_path):
    """vLLM's Ray workers print each rank's watchdog record behind "(RayWorkerWrapper pid=N) [rankN]:"
    (https://github.com/vllm-project/vllm/issues/6042); the same record cut after "Watchdog caught" and
    again between "ran for 600027" and "milliseconds" is joined back into the GATHER timeout. A line that
    ends in "Watchdog" followed by a line that does not continue the phrase is not joined to it."""
    ray = "(RayWorkerWrapper pid=4009) "
    wrapped = _host_stall(tmp_path, "ray.log", f"{ray}[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught\n"
                          f"{ray}collective operation timeout: WorkNCCL(SeqNum=158046, OpType=GATHER, "
                          "NumelIn=2867200, NumelOut=0, Timeout(ms)=600000) ran for 600027\n"
                          f"{ray}milliseconds before timing out.\n")
    found = [f for f in wrapped["findings"] if f["root_cause"] == "nccl.timeout.undetermined"]
    assert found and "GATHER seq 158046" in found[0]["explanation"], wrapped["findings"]
    apart = _host_stall(tmp_path, "apart.log", "[I329 19:15:10.775879730 ProcessGroupNCCL.cpp:912] [Rank 0] Heartbeat "
                        "Watchdog\nNCCL version 2.19.3+cuda12.0\nstep 20, loss 0.1\n")
    assert not by_root(apart), by_root(apart)


def test_watchdog_aftermath_without_its_timeout_line_in_other_wordings(tmp_path):
    """What the watchdog prints only after it found a collective failed or timed out, with the timeout
    line itself outside the excerpt: the flight recorder's failed-collective lookup with the recorder off
    ("Stack trace of the failed collective not found, potentially because FlightRecorder is disabled",
    https://github.com/2U1/Qwen-VL-Series-Finetune/issues/194) and the desync report's failure in the
    wording of https://github.com/pytorch/pytorch/pull/97548 ("Failed to retrieve NCCL desync report").
    ProcessGroupNCCL's exit warning that the group was not destroyed (https://github.com/NVIDIA/nccl/issues/1504)
    is no failure and stays quiet."""
    stack = _host_stall(tmp_path, "fr.log", "[rank1]:[E1002 16:04:30.860990304 ProcessGroupNCCL.cpp:732] Stack trace of "
                        "the failed collective not found, potentially because FlightRecorder is disabled. You can "
                        "enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.\n")
    found = [f for f in stack["findings"] if f["root_cause"] == "nccl.timeout.undetermined"]
    assert found and "on rank 1" in found[0]["explanation"] and "no stack was printed" in found[0]["explanation"]
    desync = _host_stall(tmp_path, "desync.log", "[rank1]:[E ProcessGroupNCCL.cpp:838] Failed to retrieve NCCL desync "
                         "report. Please report an issue to PyTorch Distributed.\n")
    assert by_root(desync).get("nccl.timeout.undetermined"), by_root(desync)
    quiet = _host_stall(tmp_path, "quiet.log", "[rank0]:[W1106 04:13:02.107228334 ProcessGroupNCCL.cpp:1250] Warning: "
                        "WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal "
                        "program exit, the application should call destroy_process_group to ensure that any pending "
                        "NCCL operations have finished in this process.\n")
    assert not by_root(quiet), by_root(quiet)
