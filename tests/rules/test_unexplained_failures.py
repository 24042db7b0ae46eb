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


# The shell's report of a child ended by SIGKILL (the host OOM killer's signature), as real batch
# logs print it: an SGE job script's and an LSF job shell's job reports, and the bare notice
SGE_KILLED = ("name: GeForce GTX 1080 Ti, pci bus id: 0000:03:00.0, compute capability: 6.1)\n"
              "/var/spool/sge/cluster-cn-244/job_scripts/9505996: line 8: 21792 Killed                  "
              "python3 ~/returnn-parnia/tools/get-attention-weights.py\n")
LSF_KILLED = "/zhome/ee/d/137643/.lsbatch/1586903179.6180387.shell: line 12: 24905 Killed                  " \
             "python main.py $LSB_PROJECT_NAME\n"


def test_a_job_killed_by_the_shell_reaches_the_floor(tmp_path):
    for name, text in (("sge.log", SGE_KILLED), ("lsf.log", LSF_KILLED),
                       ("bare.log", "Epoch 3/10: 41% 1024/2500\nKilled\n")):
        (finding,) = scenarios.report(_write(tmp_path, name, text))["findings"]
        assert finding["root_cause"] == "unexplained.failure" and finding["severity"] == "warning", name
        assert "Killed" in finding["explanation"], name


def test_killed_inside_a_sentence_is_not_the_shell_notice(tmp_path):
    report = scenarios.report(_write(tmp_path, "svc.log", "INFO reaper: Killed 3 idle sessions\nKilled 2 zombies\n"))
    assert not [f for f in report["findings"] if f["severity"] in ("warning", "error", "critical")]


def test_triton_out_of_resources_from_any_module_reaches_the_floor(tmp_path):
    # triton 1.x's unit tests on an RTX 3090 (triton-lang/triton#384): the class re-exported by
    # triton.code_gen, its message run together; shared memory per block, not device memory
    text = "triton.code_gen.OutOfResources: out of resource: shared memoryRequired: 110592Hardware limit: 101376\n"
    (finding,) = scenarios.report(_write(tmp_path, "pytest.log", text))["findings"]
    assert finding["root_cause"] == "unexplained.failure" and finding["severity"] == "warning"
    assert "Required: 110592" in finding["explanation"]


# XLA logs a failed custom call at W level, "Intercepted XLA runtime error:" and the absl status on
# the next line (real octo and jax logs); the E-level "Execution of replica" line may be cut away
XLA_INTERCEPTED_CUDNN = (
    "I0623 20:04:22.180553 139756573373632 compiler.py:323] Persistent compilation cache hit for 'jit_train_step'\n"
    "2024-06-23 20:04:22.388678: W external/xla/xla/service/gpu/runtime/support.cc:58] Intercepted XLA runtime error:\n"
    "UNKNOWN: CUDNN_STATUS_NOT_SUPPORTED\n")
XLA_INTERCEPTED_PTX = (
    "    2023-12-08 15:24:09.063350: W external/xla/xla/service/gpu/runtime/support.cc:58] Intercepted XLA runtime "
    "error:\n    INTERNAL: Failed to load PTX text as a module: CUDA_ERROR_INVALID_IMAGE: device kernel image is "
    "invalid\n")
JAX_BACKEND_PROBE = ("I1204 13:13:42.886529 139807170155648 xla_bridge.py:895] Unable to initialize backend 'tpu': "
                     "INTERNAL: Failed to open libtpu.so: libtpu.so: cannot open shared object file\n")


def test_an_intercepted_xla_status_reaches_the_floor(tmp_path):
    for name, text, said in (("octo.log", XLA_INTERCEPTED_CUDNN, "CUDNN_STATUS_NOT_SUPPORTED"),
                             ("jax.log", XLA_INTERCEPTED_PTX, "Failed to load PTX text")):
        findings = scenarios.report(_write(tmp_path, name, text))["findings"]
        assert {(f["root_cause"], f["severity"]) for f in findings} == {("unexplained.failure", "warning")}, name
        assert any(said in f["explanation"] for f in findings), name
    probe = scenarios.report(_write(tmp_path, "probe.log", JAX_BACKEND_PROBE))
    assert not [f for f in probe["findings"] if f["severity"] in ("warning", "error", "critical")]
