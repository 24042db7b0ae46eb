"""The 26 public log excerpts and the h200 logs: each parses, nothing is dropped, and the
facts EXPECTED.md lists are in the events (numbers re-read from the text or EXPECTED.md)."""
import re

import pytest

from ingest.engine.io import read_head
from ingest.engine.parsers.logs import parser as log
from tests.corpus import CORPUS, corpus
from tests.ingest.parsers.helpers import parse_with

LOGS = sorted(p.name for p in (CORPUS / "public" / "logs").glob("*.log"))
GiB, MiB = 2**30, 2**20


def _parse(name, **kw):
    return parse_with(log, corpus("public", "logs", name), **kw)


def test_there_are_26_logs(corpus_dir):
    assert len(LOGS) == 26


@pytest.mark.parametrize("name", LOGS)
def test_every_line_lands_in_a_row(corpus_dir, name):
    path = corpus("public", "logs", name)
    assert log.sniff(read_head(path), name)
    df, _ = parse_with(log, path)
    covered = set()
    for loc in df["loc"]:
        a, _, b = loc.removeprefix("line ").partition("-")
        covered.update(range(int(a), int(b or a) + 1))
    n = len(path.read_text().splitlines())
    assert covered == set(range(1, n + 1))


# EXPECTED.md figures (GiB unless noted): R request, T total, F free, P process, A allocated, U unallocated
OOM = {
    "cuda_oom_cads_4_torch25_expandable.log": dict(R=22.78, T=31.47, F=12.73, P=18.73, A=9.08, U=9.35),
    "cuda_oom_framepack_369.log": dict(R=30.29, T=10.74, F=3.69, P=6.68, A=6.10, U=396.58 / 1024),
    "cuda_oom_ipassr_9_torch20_fragmentation.log": dict(R=10.73, T=8.00, F=0, A=17.20, U=1.95),
    "cuda_oom_mgfn_35_torch21_capacty.log": dict(R=1.70, T=6.00, F=0, A=2.93, U=2.30),
    "cuda_oom_pytorch_16417_torch22.log": dict(R=22 / 1024, T=23.65, F=11.06 / 1024, P=23.60, A=22.90, U=194.87 / 1024),
    "cuda_oom_unilm_137_legacy_2020.log": dict(R=128 / 1024, T=11.17, F=24.81 / 1024, A=10.85, U=0.01),
}
_KEYS = dict(R="tried_to_allocate", T="total_capacity", F="free", P="in_use_by_process", A="allocated_by_pytorch",
             U="reserved_unallocated")


@pytest.mark.parametrize("name", OOM)
def test_oom_figures(corpus_dir, name):
    df, _ = _parse(name)
    ooms = df[df.kind == "oom"]
    assert len(ooms) == 1 and ooms.iloc[0]["name"] == "OutOfMemoryError"
    a = ooms.iloc[0].a
    for sym, gib in OOM[name].items():
        assert a[_KEYS[sym]] / GiB == pytest.approx(gib, abs=0.006), sym
    assert a["device"] == 0
    text = corpus("public", "logs", name).read_text()
    m = re.search(r"Tried to allocate ([\d.]+) (GiB|MiB)", text)
    assert ooms.iloc[0].value == pytest.approx(float(m.group(1)) * (GiB if m.group(2) == "GiB" else MiB), rel=1e-9)


def test_ipassr_counters_exceed_capacity_flagged(corpus_dir):
    df, _ = _parse("cuda_oom_ipassr_9_torch20_fragmentation.log")
    assert df[df.kind == "oom"].iloc[0].a["counters_exceed_capacity"] is True


def test_capture_oom_truncated(corpus_dir):
    df, _ = _parse("cudagraph_capture_oom_sglang_5285.log")
    (row,) = [r for _, r in df.iterrows() if r.kind == "oom"]
    a = row.a
    assert row.value == 448 * MiB and a["device"] == 7
    assert a["total_capacity"] is None and "free" in a["missing"]
    assert a["during_cuda_graph_capture"] and a["exception"] == "Exception"
    assert [f["func"] for f in a["frames"]][-2:] == ["init_cuda_graphs", "__init__"]
    assert row["loc"] == "line 1-18"


def test_capture_errors(corpus_dir):
    df, _ = _parse("cudagraph_capture_ktransformers_85_not_permitted.log")
    err = df[df["name"] == "cudaErrorStreamCaptureUnsupported"].iloc[0].a
    assert err["cuda_code"] == 900 and err["exception"] == "RuntimeError"
    assert err["raising_statement"] == "idx, top_x = torch.where(expert_mask[expert_idx])"
    df, _ = _parse("cudagraph_capture_vllm_club3090_106_unsupported.log")
    err = df[df["name"] == "cudaErrorStreamCaptureUnsupported"]
    assert len(err) == 1 and err.iloc[0].pid == 15193 and err.iloc[0].severity == "error"
    df, _ = _parse("cudagraph_capture_vllm_windows_5_capture_end.log")
    err = df[df["name"] == "cudaErrorStreamCaptureInvalidated"].iloc[0]
    assert err.a["cuda_code"] == 901 and err.a["frames"][-1]["func"] == "capture_end"
    assert df[df["name"] == "ProcessExit"].iloc[0].a["exit_code"] == -15
    df, _ = _parse("cudagraph_capture_tensorrt_3011.log")
    assert (df.kind == "error").sum() == 1  # printed twice: one event, the echo points at it
    assert df[df.a.map(lambda a: "repeat_of" in a)].iloc[0].a["repeat_of"] == "line 1"
    df, _ = _parse("cudagraph_capture_sglang_1751_flashinfer.log")
    (tb,) = [r for _, r in df.iterrows() if r.kind == "error"]
    assert tb["name"] == "Traceback" and tb.a["truncated"] and tb.a["exception"] == ""
    assert tb.a["frames"][-1]["func"] == "call_begin_forward"
    assert df[df["name"] == "MemoryPoolEnd"].iloc[0].a["avail_mem_gb"] == 8.38


def test_info_only_vllm_log(corpus_dir):
    df, _ = _parse("cudagraph_capture_vllm_7593_gemma2_l4_info.log")
    assert not df.kind.isin(["error", "oom"]).any()
    weights = df[df["name"] == "ModelWeightsLoaded"]
    assert len(weights) == 7 and set(w["weights_gb"] for w in weights.a) == {2.3463}
    assert sorted(weights.pid[weights.pid > 0]) == [13105, 13106, 13108, 13109, 13110, 13111]
    blocks = df[df["name"] == "KVCacheBlocks"].iloc[0].a
    assert (blocks["gpu_blocks"], blocks["cpu_blocks"]) == (22982, 6241)


def test_kv_cache(corpus_dir):
    df, _ = _parse("vllm_kv_cache_no_memory_36861.log")
    (row,) = [r for _, r in df.iterrows() if r.kind == "error"]
    assert row["name"] == "KVCacheInsufficient" and row.a["exception"] == "ValueError" and row.pid == 38456
    assert [f["func"] for f in row.a["frames"]] == ["_initialize_kv_caches", "get_kv_cache_configs",
                                                     "_check_enough_kv_cache_memory"]


def test_ib_remote_error(corpus_dir):
    df, _ = _parse("nccl_remote_error_ib_stanford_alpaca_207.log")
    (row,) = [r for _, r in df.iterrows() if r.kind == "error"]
    assert row["name"] == "NCCLNetworkError"
    assert (row.a["ib_status"], row.a["vendor_err"], row.a["peer"]) == (12, 129, "11.214.147.122")
    assert row.a["nccl_error"] == "ncclRemoteError" and row.a["nccl_version"] == "2.14.3"


_WATCHDOG = re.compile(r"\[Rank (\d+)\] Watchdog caught collective operation timeout: "
                       r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+),.*?Timeout\(ms\)=(\d+)\) ran for (\d+) milliseconds")
_GLOBAL_RANK = re.compile(r"\[rank(\d+)\]:")
WATCHDOG_LOGS = [n for n in LOGS if n.startswith("nccl_watchdog")] + ["../../h200/nccl_timeout/rank0.log"]


@pytest.mark.parametrize("name", WATCHDOG_LOGS)
def test_watchdog_timeouts_match_the_text(corpus_dir, name):
    text = corpus("public", "logs", name).read_text()
    expected = []
    for line in text.splitlines():
        for g in _WATCHDOG.findall(line):
            r = _GLOBAL_RANK.search(line)  # the global rank prefix wins over the cached [Rank N]
            expected.append((int(r.group(1)) if r else int(g[0]), int(g[1]), g[2], int(g[3]), int(g[4])))
    expected.sort()
    df, _ = _parse(name)
    rows = df[df["name"] == "NCCLWatchdogTimeout"]
    got = sorted((a["rank"], a["seq"], a["op"], a["timeout_ms"], a["elapsed_ms"]) for a in rows.a)
    assert got == expected
    assert (rows.kind == "error").all()


def test_progress_counters_merged(corpus_dir):
    df, _ = _parse("nccl_watchdog_timeout_nccl_1610_alltoall_socket.log")
    rows = {a["rank"]: a for a in df[df["name"] == "NCCLWatchdogTimeout"].a}
    assert (rows[13]["last_enqueued"], rows[13]["last_completed"], rows[13]["pg_guid"]) == (220, 215, 119)
    assert (rows[15]["last_enqueued"], rows[15]["last_completed"], rows[15]["pg_rank"]) == (57, 56, 0)
    assert rows[15]["rank_in_message"] == 1  # the cached prefix EXPECTED.md warns about
    assert all(r.a["result"] == "ncclInternalError" for _, r in df[df["name"] == "NCCLResultChain"].iterrows())
    assert not (df["name"] == "NCCLNetworkError").any()
    ts = df[df["name"] == "NCCLWatchdogTimeout"].ts.min()
    assert str(__import__("pandas").Timestamp(ts)).startswith("2025-02-18 04:54:22")
    df, _ = _parse("nccl_watchdog_timeout_arctictraining_219_fr_disabled.log")
    fail = df[df["name"] == "NCCLWatchdogFailure"].iloc[0].a
    assert (fail["rank"], fail["seq"], fail["last_enqueued"], fail["last_completed"]) == (5, 120049, 120051, 120048)
    # "Stack trace of the failed collective not found, potentially because FlightRecorder is disabled": the
    # watchdog's lookup of the failed collective, without its stack (logs.c10d_aftermath)
    stacks = df[df["name"] == "NCCLFailedCollectiveStack"]
    assert len(stacks) == 2 and not any(a["stack_printed"] for a in stacks.a)
    assert not (df["name"] == "NCCLWatchdogTimeout").any()  # the file does not prove a timeout


def test_h200_rank0_log(corpus_dir):
    df, report = parse_with(log, corpus("h200", "nccl_timeout", "rank0.log"), year=2026)
    first = df[df["name"] == "NCCLWatchdogTimeout"].sort_values("loc").iloc[0]
    a = first.a
    assert (a["seq"], a["op"], a["timeout_ms"], a["elapsed_ms"]) == (7, "ALLREDUCE", 6000, 6070)
    assert (a["last_enqueued"], a["last_completed"], a["pg"]) == (8, 6, "default_pg")
    assert str(__import__("pandas").Timestamp(first.ts)).startswith("2026-11-29 08:19:30.038029")
    assert (report.meta["clock"]["domain"], report.meta["clock"]["year_assumed"]) == ("unix", 2026)
    assert (df.host == "vm").sum() > 50 and set(df[df.host == "vm"].pid) == {579}


def test_torch_compile_log(corpus_dir):
    df, _ = parse_with(log, corpus("h200", "compile_cudagraphs", "torch_compile.log"))
    text = corpus("h200", "compile_cudagraphs", "torch_compile.log").read_text()
    breaks = df[df["name"] == "GraphBreak"]
    assert len(breaks) == text.count("] Graph break in user code at ")
    reasons = re.findall(r"Graph Break Reason: (.*)", text)
    assert all(r.strip() in a["reason"] for r, a in zip(reasons, breaks.a))
    assert any("torch.cond" in h for a in breaks.a for h in a["hints"])
    assert [a["user_location"] for a in breaks.a] == re.findall(r"Graph break in user code at (\S+)", text)
    parts = df[df["name"] == "CudagraphPartitions"]
    assert sum(a["non_cudagraphable"] for a in parts.a) == sum(
        int(n) for n in re.findall(r"(\d+) non-cudagraphable", text))
    ops = df[df["name"] == "NonCudagraphableOp"]
    assert [a["reason"] for a in ops.a] == re.findall(r"op\d+: reason=([^,]+),", text)


def test_nccl_tests_and_megatron(corpus_dir):
    name = "nccl_tests_allreduce_8xa100_superbench.log"
    df, _ = _parse(name)
    rows = df[df["name"] == "nccl_tests.busbw"]
    text = corpus("public", "logs", name).read_text()
    data = [l.split() for l in text.splitlines() if re.match(r"^\s+\d+\s+\d+\s+float", l)]
    assert len(rows) == len(data)
    assert rows.value.max() == max(float(d[6]) for d in data) == 235.26
    assert max(a["in_place"]["busbw_gbs"] for a in rows.a) == 235.03
    df, _ = _parse("megatron_deepspeed_2node_16gpu_superbench.log")
    it = df[df["name"] == "TrainingIteration"].sort_values("loc")
    assert list(it.value) == [76015.3, 75254.0, 75249.6, 75182.4, 74494.9]
    assert it.iloc[-1].a["lm_loss"] == pytest.approx(9.927882)
    exits = df[df["name"] == "ProcessExit"]
    assert set(exits.host) == {"vm-07-05", "vm-07-14"} and all(a["return_code"] == 1 for a in exits.a)
