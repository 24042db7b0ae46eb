"""The floor under every rule (issue 33): a failure the input shows and no rule explains is an
`unexplained.failure` warning, fingerprinted by its normalised message; any other finding at
warning or above explains it away; healthy and look-alike logs stay quiet."""
from diagnosis.engine import scenarios
from rules.engine.features.failures import fingerprint, normalise

TF_FATAL = "2023-07-19 22:08:36.875173: F ./tensorflow/core/util/gpu_launch_config.h:{line}] Check failed: " \
           "err == hipSuccess ({code} vs. 0)\nAborted (core dumped)\n"
TF_BENIGN = """2024-03-01 10:00:01.100000: E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:9261] Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when one has already been registered
2024-03-01 10:00:01.100001: E external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:607] Unable to register cuFFT factory: Attempting to register factory for plugin cuFFT when one has already been registered
2024-03-01 10:00:01.100002: E external/local_xla/xla/stream_executor/cuda/cuda_blas.cc:1515] Unable to register cuBLAS factory: Attempting to register factory for plugin cuBLAS when one has already been registered
2024-03-01 10:00:02.000000: I tensorflow/core/platform/cpu_feature_guard.cc:182] This TensorFlow binary is optimized to use available CPU instructions in performance-critical operations.
"""
OOM_AND_LOGGER = """2026-11-29 08:55:52,948 ERROR request 17 failed
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 2.19 MiB is free. Including non-PyTorch memory, this process has 79.12 GiB memory in use. Of the allocated memory 78.57 GiB is allocated by PyTorch, and 11.60 MiB is reserved by PyTorch but unallocated.
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_normalised_message_folds_what_varies():
    a = "Check failed: err == hipSuccess (98 vs. 0) at /opt/rocm-5.6/include/x.h:174 ptr 0x7f3b6e7236fc"
    b = "Check failed: err == hipSuccess (700 vs. 0) at /usr/lib/rocm/include/x.h:9 ptr 0x55aa01"
    assert normalise(a) == normalise(b) and fingerprint(a) == fingerprint(b)
    assert fingerprint(a) != fingerprint("Check failed: status == miopenStatusSuccess (7 vs. 0)")


def test_an_unexplained_fatal_line_is_reported(tmp_path):
    report = scenarios.report(_write(tmp_path, "worker.log", TF_FATAL.format(line=174, code=98)))
    (finding,) = report["findings"]
    assert finding["root_cause"] == "unexplained.failure" and finding["severity"] == "warning"
    assert "Check failed: err == hipSuccess (98 vs. 0)" in finding["explanation"]
    assert any("gpu_launch_config.h" in ev["text"] for ev in finding["evidence"])


def test_the_same_failure_clusters_across_traces(tmp_path):
    one = scenarios.report(_write(tmp_path, "a.log", TF_FATAL.format(line=174, code=98)))
    two = scenarios.report(_write(tmp_path, "b.log", TF_FATAL.format(line=180, code=209)))
    assert one["clusters"][0]["fingerprint"] == two["clusters"][0]["fingerprint"]


def test_benign_error_level_startup_lines_stay_quiet(tmp_path):
    report = scenarios.report(_write(tmp_path, "tf.log", TF_BENIGN))
    assert not [f for f in report["findings"] if f["severity"] in ("warning", "error", "critical")]


def test_a_rule_that_explains_the_failure_drops_the_floor(tmp_path):
    report = scenarios.report(_write(tmp_path, "server.log", OOM_AND_LOGGER))
    causes = {f["root_cause"] for f in report["findings"]}
    assert "cuda_oom.capacity" in causes and "unexplained.failure" not in causes
    assert not [s for s in report.get("suppressed", []) if s["root_cause"] == "unexplained.failure"]
