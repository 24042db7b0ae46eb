"""Serving KV-cache lines (logs.serving) and TorchDynamo reports (logs.dynamo, GraphBreak):
the real excerpts of tests/fixtures/open_world, plus the other wordings written out here."""
import time
from pathlib import Path

import pytest

from ingest.engine.parsers.logs import parser as log
from ingest.engine.parsers.logs.serving import classify_serving
from tests.ingest.parsers.helpers import parse_with

OPEN_WORLD = Path(__file__).resolve().parents[2] / "fixtures" / "open_world"


def _parse(family: str, name: str):
    df, _ = parse_with(log, OPEN_WORLD / family / name)
    return df


def _parse_text(tmp_path, text: str, name: str = "x.log"):
    path = tmp_path / name
    path.write_text(text)
    df, _ = parse_with(log, path)
    return df


def _rows(df, name):
    return [r for _, r in df.iterrows() if r["name"] == name]


# --- serving ---------------------------------------------------------------------------------

def test_v0_refusal_numbers():
    df = _parse("kv_cache", "vllm_10517_max_seq_len_29k.log")
    (row,) = _rows(df, "KVCacheInsufficient")
    assert row.kind == "error" and row.a["variant"] == "max_len_gt_cache"
    assert (row.a["max_model_len"], row.a["kv_cache_tokens"]) == (29000, 23648)
    assert "29,000" in row.a["summary"] and "23,648" in row.a["summary"]
    (conc,) = _rows(df, "KVCacheConcurrency")
    assert conc.value == pytest.approx(0.82) and conc.a["max_model_len"] == 29000
    assert _rows(df, "KVCacheBlocks")[0].a["gpu_blocks"] == 1478
    assert _rows(df, "KVCacheMemory")[0].value == pytest.approx(2.89)


def test_v1_refusal_inside_a_traceback():
    df = _parse("kv_cache", "tpu_inference_223_v1_kv_needed.log")
    (row,) = _rows(df, "KVCacheInsufficient")
    a = row.a
    assert a["exception"] == "ValueError" and a["variant"] == "needed_gt_available"
    assert (a["max_model_len"], a["needed_gib"], a["available_gib"], a["estimated_max_len"]) == (131072, 16.0, 0.71, 5632)


def test_negative_sglang_pool_is_a_fact_per_rank():
    df = _parse("kv_cache", "sglang_7691_negative_profiled_tokens.log")
    pools = _rows(df, "KVCachePool")
    assert len(pools) == 8 and {p.value for p in pools} == {-561981.0}
    assert not _rows(df, "KVCacheInsufficient")  # the rule, not the parser, decides <= 0 is fatal


def test_stats_lines_vllm_v0_v1_and_sglang():
    v0 = _parse("kv_cache", "vllm_5578_swap_preemption_tqdm.log")  # behind a tqdm bar
    first = _rows(v0, "ServingStats")[0]
    assert first.value == pytest.approx(0.992)
    assert (first.a["running"], first.a["waiting"], first.a["swapped"]) == (34, 9832, 100)
    v1 = _rows(_parse("kv_cache", "vllm_43295_v1_kv_full_requests_waiting.log"), "ServingStats")
    assert [r.a["waiting"] for r in v1] == [43, 42, 33, 23, 23] and v1[-1].value == pytest.approx(0.984)
    swa = _rows(_parse("kv_cache", "sglang_26248_swa_full_token_usage_queue.log"), "ServingStats")
    assert [(r.value, r.a["waiting"]) for r in swa] == [(1.0, 3)] * 3  # the full pool, not the SWA one


def test_preemption_and_retraction():
    (pre,) = _rows(_parse("kv_cache", "limo_29_preemption_single_line.log"), "KVCachePreemption")
    assert (pre.a["mode"], pre.a["cumulative_preemptions"], pre.severity) == ("RECOMPUTE", 101, "warning")
    retracts = _rows(_parse("kv_cache", "sglang_4184_decode_oom_retract.log"), "KVCacheRetract")
    assert len(retracts) == 11 and retracts[-1].a["new_token_ratio_after"] == pytest.approx(0.1919)


@pytest.mark.parametrize("line,name,check", [
    ("Sequence group cmpl-71c6 is preempted in PreemptionMode.RECOMPUTE mode because there is not enough KV cache "
     "space. This can impact end-to-end performance. total_num_cumulative_preemption=1", "KVCachePreemption",
     lambda h: h.attrs["cumulative_preemptions"] == 1),
    ("WARNING 05-09 00:49:33 scheduler.py:1057 Sequence group 0 is preempted by PreemptionMode.SWAP mode because "
     "there is not enough KV cache space. total_cumulative_preemption_cnt=1", "KVCachePreemption",
     lambda h: h.attrs["mode"] == "SWAP"),
    ("[2025-01-01 00:00:00 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 3, "
     "#new_token_ratio: 0.5797 -> 1.0000", "KVCacheRetract", lambda h: h.attrs["retracted"] == 3),
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
     "mem_fraction_static=0.84", "KVCacheInsufficient", lambda h: h.attrs["mem_fraction_static"] == 0.84),
    ("[TP0] max_total_num_tokens=-1200, chunked_prefill_size=8192, max_prefill_tokens=16384", "KVCachePool",
     lambda h: h.value == -1200),
    ("Not enough memory to handle 16000 total tokens with 2 prefill tokens. You need to decrease "
     "`--max-batch-total-tokens` or `--max-batch-prefill-tokens`", "KVCacheInsufficient",
     lambda h: h.attrs["max_batch_total_tokens"] == 16000),
    ("INFO 03-21 20:15:45 [worker.py:267] model weights take 12.55GiB; non_torch_memory takes 0.16GiB; PyTorch "
     "activation peak memory takes 2.38GiB; the rest of the memory reserved for KV Cache is -0.5GiB.", "KVCacheMemory",
     lambda h: h.value == -0.5),
    ("INFO 07-28 06:40:59 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, Running: 8 reqs, "
     "Waiting: 2 reqs, KV cache usage: 99.1%, Prefix cache hit rate: 0.0%", "ServingStats",
     lambda h: (h.attrs["waiting"], round(h.value, 3)) == (2, 0.991)),
])
def test_other_wordings(line, name, check):
    hit = classify_serving(line)
    assert hit is not None and hit.name == name and check(hit)


def test_healthy_startup_has_no_refusal():
    df = _parse("kv_cache", "vllm_28228_v1_tp2_startup_warnings.log")
    assert not df.kind.isin(["error", "oom"]).any()
    assert _rows(df, "KVCacheSize")[0].a["kv_cache_tokens"] == 75840


def test_serving_patterns_are_linear_on_long_lines():
    junk = "Running: 1 reqs, " + "GPU KV cache usage: " * 4000 + "x" * 20000 + " #queue-req token usage: " * 2000
    start = time.perf_counter()
    classify_serving(junk)
    classify_serving("To serve at least one request with the model " + "(" * 30000)
    assert time.perf_counter() - start < 0.5


# --- torch.compile ---------------------------------------------------------------------------

def test_recompile_limit_report():
    df = _parse("torch_compile", "thunder_2682_recompile_limit_scalar_arg.log")
    (row,) = _rows(df, "DynamoRecompile")
    a = row.a
    assert (a["event"], a["limit_name"], a["limit"], a["function"]) == ("limit_hit", "recompile_limit", 8, "foo")
    assert a["last_reason"].startswith("0/7: y == 7") and row["loc"] == "line 1-5"


def test_fail_on_recompile_limit_is_an_error():
    df = _parse("torch_compile", "dion_23_fail_on_recompile_limit.log")
    assert _rows(df, "DynamoRecompile")[0].a["limit_name"] == "recompile_limit"
    (err,) = [r for _, r in df.iterrows() if r.kind == "error"]
    assert err["name"] == "DynamoRecompileError"


def test_recompiles_under_the_python_logging_header():
    df = _parse("torch_compile", "pytorch_110325_recompiles_legacy_logger.log")
    reports = _rows(df, "DynamoRecompile")
    assert [r["loc"] for r in reports] == ["line 1-7", "line 8-9"]
    assert len(reports[0].a["reasons"]) == 5 and reports[0].a["function"] == "forward"


def test_explain_and_profiler_reports():
    (ex,) = _rows(_parse("torch_compile", "thunder_1810_explain_generic_jump.log"), "DynamoExplain")
    assert (ex.a["graph_count"], ex.a["graph_break_count"], ex.a["reason"]) == (2, 1, "generic_jump TensorVariable()")
    assert ex.a["user_location"].endswith("test_dynamo_explain.py:4 in fn")
    (legacy,) = _rows(_parse("torch_compile", "torchdynamo_895_explain_prerelease.log"), "DynamoExplain")
    assert (legacy.value, len(legacy.a["reasons"]), legacy.a["user_locations"][1]) == (2, 2, "t2.py:17 in toy_example")
    (none,) = _rows(_parse("torch_compile", "pytorch_113443_explain_no_breaks.log"), "DynamoExplain")
    assert none.value == 0
    (prof,) = _rows(_parse("torch_compile", "pytorch_113443_compile_profiler.log"), "DynamoProfilerReport")
    assert prof.a["graph_breaks"] == 3 and prof.a["recompiles"] == 0 and len(prof.a["graph_break_reasons"]) == 2


def test_old_graph_break_formats_never_become_tracebacks(tmp_path):
    for family, name in (("torch_compile", "pytorch_97884_legacy_graph_break_warning.log"),
                         ("torch_compile", "pytorch_scatter_457_item_graph_break.log"),
                         ("torch_compile", "torchdynamo_895_explain_prerelease.log")):
        df = _parse(family, name)
        assert not df.kind.isin(["error", "oom"]).any(), name
    (gb,) = _rows(_parse("torch_compile", "pytorch_scatter_457_item_graph_break.log"), "GraphBreak")
    assert gb.a["reason"] == "`Tensor.item()`" and gb.a["user_location"].endswith("base.py:32")
    text = ('[2023-11-06 14:54:08,549] [0/0] torch._dynamo.symbolic_convert.__graph_breaks: [DEBUG] Graph break: '
            'from user code at:\n  File "/app/model.py", line 10, in forward\n    print(x)\n'
            'Traceback (most recent call last):\n  File "/t/torch/_dynamo/symbolic_convert.py", line 470, in wrapper\n'
            '    return inner_fn(self, inst)\n'
            'torch._dynamo.exc.Unsupported: call_function BuiltinVariable(print) [TensorVariable()] {}\n')
    df = _parse_text(tmp_path, text)
    (gb,) = _rows(df, "GraphBreak")
    assert gb["loc"] == "line 1-7" and gb.a["user_location"] == "/app/model.py:10"
    assert "call_function BuiltinVariable(print)" in gb.a["reason"]
    assert not df.kind.isin(["error", "oom"]).any()


def test_resume_functions_count_as_breaks(tmp_path):
    rows = _rows(_parse("torch_compile", "pytorch_96130_resume_after_graph_break.log"), "GraphBreakResume")
    assert len(rows) == 5 and rows[0].a["function"] == "_expand_inputs_for_generation"
    df = _parse_text(tmp_path, "I0101 00:00:00.000000 1 torch/_dynamo/symbolic_convert.py:2000] [0/0] Step 1: "
                               "torchdynamo start tracing torch_dynamo_resume_in_forward_at_52 /a.py:52\n")
    (row,) = _rows(df, "GraphBreakResume")
    assert (row.a["function"], row.a["line"]) == ("forward", 52)


def test_wont_convert_frame_is_one_graph_break(tmp_path):
    text = ("[2023-03-10 10:00:00,000] torch._dynamo.convert_frame: [WARNING] WON'T CONVERT forward /app/model.py "
            "line 40 \ndue to: \nTraceback (most recent call last):\n"
            '  File "/t/torch/_dynamo/convert_frame.py", line 324, in _compile\n'
            "    out_code = transform_code_object(code, transform)\ntorch._dynamo.exc.Unsupported: generator\n\n"
            'from user code:\n   File "/app/model.py", line 45, in forward\n    x = sum(t for t in xs)\n\n'
            "Set torch._dynamo.config.verbose=True for more information\n")
    df = _parse_text(tmp_path, text)
    (gb,) = _rows(df, "GraphBreak")
    assert gb["loc"] == "line 1-12" and gb.a["user_location"] == "/app/model.py:40"
    assert gb.a["reason"].endswith("Unsupported: generator")
    assert not df.kind.isin(["error", "oom"]).any()


def test_fatal_recompile_inside_a_traceback(tmp_path):
    text = ("Traceback (most recent call last):\n  File \"/app/train.py\", line 9, in <module>\n    step(x)\n"
            "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True. Excessive "
            "recompilations can degrade performance.\n")
    (err,) = [r for _, r in _parse_text(tmp_path, text).iterrows() if r.kind == "error"]
    assert err["name"] == "DynamoRecompileError" and err.a["frames"][0]["func"] == "<module>"


def test_dynamo_patterns_are_linear_on_long_lines(tmp_path):
    lines = ["Torchdynamo Profiler Report", "Graph Break Reason  Count", "-----  -----",
             "a" + " " * 30000 + "b", "x" * 30000 + "  " * 5000 + "z",
             "torch_dynamo_resume_in_" + "a" * 40000, "Graph Count: 1", "    Reason: " + "(" * 40000,
             "      <FrameSummary file " + "," * 30000, "torch._dynamo hit config.recompile_limit (8)",
             "   function: '" + "x" * 30000]
    start = time.perf_counter()
    _parse_text(tmp_path, "\n".join(lines) + "\n")
    assert time.perf_counter() - start < 2.0


# --- round 2: other engines, context cuts, progress bars, cut records -----------------------

@pytest.mark.parametrize("line,name,variant", [
    ("AssertionError: No space left for only one request, self.token_to_kv_pool_allocator.available_size()=0",
     "KVCacheInsufficient", "kv_pool_exhausted"),
    ("[2026-01-01 00:00:00 TP0] Out of memory. Try to lower your batch size.", "KVCacheInsufficient", "token_pool_oom"),
    ("RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for `--max-running-requests`. "
     "self.req_to_token_pool.available_size()=0, num_reqs=3,", "KVCacheInsufficient", "req_slots_exhausted"),
    ("[TM][ERROR] No enough blocks. Assertion fail: /root/lmdeploy/src/turbomind/models/llama/LlamaBatch.cc:358",
     "KVCacheInsufficient", "turbomind_no_blocks"),
    ("RuntimeError: No enough gpu memory for kv cache.", "KVCacheInsufficient", "no_kv_memory"),
    ("AssertionError: Impossible to fit in any sequence in kvCache", "KVCacheInsufficient", "seq_does_not_fit"),
    ('Error: Warmup(Generation("Not enough memory to handle 4096 prefill tokens. You need to decrease '
     '`--max-batch-prefill-tokens`"))', "KVCacheInsufficient", "tgi_prefill_tokens"),
    ("[TensorRT-LLM][WARNING] maxAttentionWindow and maxSequenceLen are too large for at least one sequence to fit "
     "in kvCache. they are reduced to 5185", "KVCacheContextReduced", None),
    ("WARNING 05-17 10:00:00 scheduler.py:1057] Input prompt (10854 tokens) is too long and exceeds the capacity of "
     "block_manager", "KVCacheFull", None),
    ("decode: failed to find a memory slot for batch of size 1024", "KVCacheFull", None),
    ('vllm:num_preemptions_total{engine="0",model_name="m"} 12.0', "KVCachePreemption", None),
])
def test_round2_wordings(line, name, variant):
    hit = classify_serving(line)
    assert hit is not None and hit.name == name
    assert variant is None or hit.attrs["variant"] == variant


@pytest.mark.parametrize("line", [
    "RuntimeError: CUDA out of memory. Try to lower your batch size.",       # not SGLang's token pool
    "[2025-07-03 12:45:22,498] LMCache WARNING: Failed to allocate memory for the KV cache.",
    "(VllmWorkerProcess pid=76225) ... shm_broadcast 76225 WARNING  No available block found in 60 second.",
    "perror: No enough blocks",                                              # TurboMind's phrase, not TurboMind
    'vllm:num_preemptions_total{engine="0",model_name="m"} 0.0',
])
def test_round2_lookalikes_stay_quiet(line):
    hit = classify_serving(line)
    assert hit is None or hit.name not in ("KVCacheInsufficient", "KVCachePreemption", "KVCacheFull")


def test_context_cut_to_fit_is_a_warning_and_auto_fit_is_not():
    (cut,) = _rows(_parse("kv_cache", "lmdeploy_3950_turbomind_session_len_truncated.log"), "KVCacheContextReduced")
    assert (cut.a["requested_len"], cut.a["reduced_to"], cut.severity) == (131072, 111360, "warning")
    auto = classify_serving("INFO 01-01 00:00:00 [gpu_worker.py:1] Auto-fit max_model_len: reduced from 131072 to "
                            "65536 to fit in available GPU memory (3.2 GiB available for KV cache)")
    assert auto.name == "KVCacheContextReduced" and auto.attrs["auto_fit"] and auto.severity == ""


def test_glued_stats_records_keep_the_worst_one():
    line = ("INFO 07-28 06:40:59 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, Running: 8 reqs, "
            "Waiting: 0 reqs, GPU KV cache usage: 91.6%, Prefix cache hit rate: 0.0%INFO 07-28 06:41:09 "
            "[loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, Running: 8 reqs, Waiting: 3 reqs, "
            "GPU KV cache usage: 97.9%, Prefix cache hit rate: 0.0%")
    hit = classify_serving(line)
    assert hit.attrs["waiting"] == 3 and hit.attrs["glued_records"] == 2 and hit.value == pytest.approx(0.979)


def test_progress_bar_glued_before_the_record():
    (gb,) = _rows(_parse("torch_compile", "distrifuser_26_progress_bar_rank_item_break.log"), "GraphBreak")
    assert gb["loc"] == "line 1-8" and gb.a["reason"] == "`Tensor.item()`"
    skips = _rows(_parse("torch_compile", "dinfer_38_progress_bar_cudagraph_cpu_skip.log"), "CudagraphsSkipped")
    assert [s.a["reason"] for s in skips] == ["cpu device (arg3_1)", "cpu device (arg7_1)"]


def test_records_cut_mid_way_are_known_by_their_artifact():
    (gb,) = _rows(_parse("torch_compile", "pytorch_137749_rank_graph_breaks_exc_info_only.log"), "GraphBreak")
    assert gb["loc"] == "line 1-4"
    (legacy,) = _rows(_parse("torch_compile", "pytorch_119292_legacy_graph_breaks_logger_exc_info.log"), "GraphBreak")
    assert legacy["loc"] == "line 1-7"
    for name in ("pytorch_137749_rank_graph_breaks_exc_info_only.log", "pytorch_164119_guards_dump_only.log"):
        assert not _parse("torch_compile", name).kind.isin(["error", "oom"]).any(), name


def test_recompiles_verbose_blank_lines_and_tuple_messages(tmp_path):
    env = "V1016 10:01:02.123000 1234 torch/_dynamo/guards.py:2800] [0/2] [__recompiles_verbose]"
    text = "\n".join([f"{env} Recompiling function fn in /tmp/a.py:3",
                      f"{env}     triggered by the following guard failure(s):", f"{env}     guard 0 failures:",
                      f"{env}     - 0/1: tensor 'x' size mismatch at index 0. expected 4, actual 5", env,
                      f"{env}     guard 1 failures:", f"{env}     - 0/0: tensor 'x' size mismatch"]) + "\n"
    (rec,) = _rows(_parse_text(tmp_path, text), "DynamoRecompile")
    assert rec["loc"] == "line 1-7" and len(rec.a["reasons"]) == 2
    tuples = _rows(_parse("torch_compile", "pytorch_110928_recompiles_tuple_message.log"), "DynamoRecompile")
    assert [r.a["function"] for r in tuples] == ["fn", "fn"]
    assert tuples[0].a["last_reason"] == "L['a'] == 0, with LHS value: 1"


def test_traceback_cut_at_dynamo_unimplemented_is_unsupported():
    (err,) = [r for _, r in _parse("torch_compile", "diffusers_3313_hasattr_unimplemented_frames_cut.log").iterrows()
              if r.kind == "error"]
    assert err["name"] == "DynamoUnsupported" and err.a["reason"] == "hasattr: {repr(self)}"


def test_cudagraph_rerecords_and_skip_wordings():
    (rr,) = _rows(_parse("torch_compile", "parler_tts_93_cudagraph_550_distinct_sizes.log"), "CudagraphRerecords")
    assert rr.value == 550
    from ingest.engine.parsers.logs.lines import classify
    f = classify("skipping cudagraphs due to disabling cudagraphs due to incompatible op "
                 "aten._local_scalar_dense.default")
    assert f.name == "CudagraphsSkipped" and f.attrs["reason"] == "incompatible op aten._local_scalar_dense.default"


def test_progress_bar_pattern_is_linear():
    from ingest.engine.parsers.logs.prefix import split_line
    start = time.perf_counter()
    for junk in ("a" * 60000, "[00:00<" + "?" * 60000, "x" * 299 + "[00:00<?, ?it/s" + "]" * 30000,
                 "[1:00, " + "1" * 60000 + "it/s"):
        split_line(junk, 2025)
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("line,reason", [
    # torch 2.1 tracebacks print the class's bare name (pytorch/pytorch#108650, diffusers' logger.info in forward)
    ("Unsupported: inline in skipfiles: Logger.info  | info /usr/lib/python3.10/logging/__init__.py",
     "inline in skipfiles: Logger.info  | info /usr/lib/python3.10/logging/__init__.py"),
    ("Unsupported: dynamic shape operator: aten.nonzero.default", "dynamic shape operator: aten.nonzero.default"),
    ("torch._dynamo.exc.Unsupported: call_function BuiltinVariable(print) [ConstantVariable(str)] {}",
     "call_function BuiltinVariable(print) [ConstantVariable(str)] {}"),
])
def test_dynamo_unsupported_with_or_without_its_module(line, reason):
    from ingest.engine.parsers.logs.lines import classify

    hit = classify(line)
    assert hit is not None and (hit.kind, hit.name, hit.attrs["reason"]) == ("error", "DynamoUnsupported", reason)


def test_another_tools_unsupported_is_not_dynamos():
    from ingest.engine.parsers.logs.lines import classify

    hit = classify("Unsupported: ONNX export of operator unsafe_chunk, output size should be static")
    assert hit is None or hit.name != "DynamoUnsupported"
