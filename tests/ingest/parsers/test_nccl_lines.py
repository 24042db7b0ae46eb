"""NCCL and c10d lines beyond the plain watchdog timeout: mismatch reports from every source,
records wrapped over several lines, CUDA faults seen by the watchdog, NCCL RAS reports, and the
flight-recorder analyzer's mismatch verdict. Real files from tests/fixtures; expectations are
read from the raw text with plain `re` where they can be."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

from ingest.engine.parsers.logs import parser as log
from ingest.engine.parsers.logs.lines import classify
from ingest.engine.parsers.logs.nccl import join_wrapped, record_incomplete
from tests.ingest.parsers.helpers import parse_with

FIX = Path(__file__).resolve().parents[2] / "fixtures"
MISMATCH = FIX / "open_world" / "nccl_mismatch"
WATCHDOG = FIX / "open_world" / "nccl_watchdog"


def errors(path: Path):
    df, _ = parse_with(log, path)
    return df[df["kind"].isin(["error", "oom"])]


def test_detail_fingerprints_name_both_ranks_and_what_differs():
    path = MISMATCH / "ms_swift_9443_allreduce_shape_detail.log"
    [row] = errors(path).itertuples()
    a = row.a
    assert row.name == "CollectiveFingerprintMismatch" and a["rank"] == 1
    shapes = re.findall(r"TensorShape=\[(\d+)\]", path.read_text())
    assert [s["shape"] for s in a["sides"]] == shapes and a["ranks"] == [1, 0]
    assert (a["seq"], a["op"], a["differs"]) == (3104, "ALLREDUCE", ["shape"])


def test_detail_aspects_list_every_difference():
    rows = errors(MISMATCH / "simpletuner_2712_optype_seq_detail.log")
    [row] = rows[rows["name"] == "CollectiveFingerprintMismatch"].itertuples()
    assert row.a["differs"] == ["sequence number", "op type", "shape", "dtype", "device"]
    assert [(s["rank"], s["op"], s["seq"]) for s in row.a["sides"]] == [(1, "ALLGATHER", "101"), (7, "REDUCE", "0")]


def test_detail_inside_a_traceback_names_the_event():
    rows = errors(MISMATCH / "lightning_19680_allgather_vs_allgather_base_detail.log")
    # the frames printed after the exception line (the other process's) stay a truncated traceback
    assert list(rows["name"]) == ["CollectiveFingerprintMismatch", "Traceback"]
    assert rows["a"].iloc[0]["differs"] == ["op type"]


def test_rank_prefixed_python_traceback_keeps_its_exception_line():
    # torch prefixes Python lines with "[rankN]: " (a space), its C++ logger with "[rankN]:"
    path = FIX / "h200_open_world" / "nccl_peer_oom" / "rank1.log"
    rows = errors(path)
    assert "OutOfMemoryError" in set(rows["name"]) and set(rows["a"].map(lambda a: a.get("rank"))) == {1}


def test_nccl_transport_size_checks():
    ib = classify("h:1:2 [0] transport/net_ib.cc:1038 NCCL WARN NET/IB : req 0/1 tag 0 peer 10.0.0.6<58683> "
                  "collective mismatch error, local size 496640 remote size 65536")
    assert (ib.name, ib.attrs["message_bytes"], ib.attrs["posted_bytes"], ib.attrs["peer"]) == (
        "NCCLCollectiveSizeMismatch", 496640, 65536, "10.0.0.6<58683>")
    sock = errors(MISMATCH / "nccl_626_socket_message_truncated_wrapped.log")
    assert list(sock["loc"]) == ["line 1-2"]  # the numbers are on the wrapped second line
    assert (sock["a"].iloc[0]["message_bytes"], sock["a"].iloc[0]["posted_bytes"]) == (1048576, 65536)
    # bootstrap's "Message truncated" is an init failure, not a collective's size
    assert classify("h:1:2 [5] bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes instead of 4") is None


def test_nccl_mismatched_collective_warning():
    f = classify((MISMATCH / "nccl_296_mismatched_collective_detected.log").read_text().strip())
    assert (f.name, f.attrs["around_rank"]) == ("NCCLMismatchedCollective", 39)


def test_watchdog_records_wrapped_by_a_terminal_are_joined():
    path = WATCHDOG / "open_r1_620_broadcast_wrapped.log"
    rows = errors(path)
    ranks = [int(r) for r in re.findall(r"^\[rank(\d+)\]", path.read_text(), re.M)]
    assert sorted(rows["a"].map(lambda a: a["rank"])) == sorted(ranks)
    assert set(rows["a"].map(lambda a: (a["seq"], a["op"], a["numel_in"], a["elapsed_ms"] > 0))) == {
        (4, "BROADCAST", 112, True)}
    assert all(loc.startswith("line ") and "-" in loc for loc in rows["loc"])


def test_watchdog_records_wrapped_by_a_logger_at_a_dropped_space():
    rows = errors(WATCHDOG / "milabench_269_reduce_wrapped_stderr.log")
    failure = rows[rows["name"] == "NCCLWatchdogFailure"].iloc[0]["a"]
    assert (failure["seq"], failure["last_enqueued"], failure["last_completed"], failure["pg_name"]) == (
        2070, 2070, 2069, "default_pg")
    assert len(rows[rows["name"] == "NCCLWatchdogTimeout"]) == 4


def test_join_prefers_the_join_that_restores_the_record():
    assert join_wrapped("WorkNCCL(SeqNum=4, OpTy", "pe=BROADCAST") == "WorkNCCL(SeqNum=4, OpType=BROADCAST"
    head = "[PG 0 Rank 1] Exception (either an error or timeout) detected"
    assert record_incomplete(head)
    assert join_wrapped(head, "by watchdog at work: 7, last enqueued NCCL work: 7, last completed NCCL work: 6.") \
        .endswith("detected by watchdog at work: 7, last enqueued NCCL work: 7, last completed NCCL work: 6.")
    assert not record_incomplete("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=X) ran "
                                 "for 5 milliseconds before timing out.")


def test_cuda_fault_in_a_watchdog_line_is_the_cuda_error():
    rows = errors(WATCHDOG / "lmdeploy_3048_watchdog_illegal_address.log")
    assert list(rows["name"]) == ["cudaErrorIllegalAddress"]
    assert rows["a"].iloc[0]["surfaced_by"] == "nccl_watchdog" and rows["a"].iloc[0]["rank"] == 0


def test_cuda_message_cut_by_a_wrap_still_names_the_error():
    rows = errors(WATCHDOG / "vllm_5537_docker_wrapped_illegal_address.log")
    assert list(rows["name"]) == ["cudaErrorIllegalAddress"] and list(rows["loc"]) == ["line 1-2"]


def test_ras_report_lines():
    df, _ = parse_with(log, WATCHDOG / "nccl_1911_ras_allgather_count_mismatch.txt")
    names = list(df[df["name"].str.startswith("NCCLRas")]["name"])
    assert names == ["NCCLRasCommunicator", "NCCLRasOpCountMismatch", "NCCLRasOpCount", "NCCLRasOpCount",
                     "NCCLRasRank", "NCCLRasRank"]
    counts = df[df["name"] == "NCCLRasOpCount"]["a"].map(lambda a: (a["count"], a["operation"]))
    assert list(counts) == [(30, 640), (2, 641)]
    op = df[df["name"] == "NCCLRasOpCountMismatch"]["a"].iloc[0]["op"]
    assert op == "AllGather"


def test_fr_analyzer_mismatch_verdict():
    path = FIX / "nccl_multirank" / "analyzer" / "collective_mismatch.fr_trace.txt"
    text = path.read_text()
    rows = errors(path)
    [a] = rows[rows["name"] == "FRCollectiveMismatch"]["a"]
    culprit, kind = re.search(r"Culprit rank (\d+); Error type: (\w+)", text).groups()
    assert a["culprit_ranks"] == [int(culprit)] and a["error_types"] == [kind]
    assert a["seq"] == int(re.search(r"sequence number: (\d+) has errors", text).group(1))
    assert "524288" in a["detail"]


def test_ras_json_report_rows_match_the_text_report():
    from ingest.engine.parsers.logs import nccl_ras_json
    path = WATCHDOG / "nccl_docs_ras_json_unresponsive_rank.json"
    df, report = parse_with(nccl_ras_json, path)
    assert list(df["name"]) == ["NCCLRasCommunicator", "NCCLRasMissingRanks", "NCCLRasRank"]
    assert df["a"].iloc[2]["rank"] == 1 and df["a"].iloc[1]["count"] == 1
    assert report.meta["nccl_version"] == "2.29.1"


# --- round 2: wordings of other versions and tools ------------------------------------------------
def test_older_nccl_mismatch_wording_names_the_rank():
    f = classify((MISMATCH / "nccl_257_may_be_hanging_mismatch_around_rank.log").read_text().strip())
    assert (f.name, f.attrs["around_rank"]) == ("NCCLMismatchedCollective", 3)
    # the IB transport's own "collective mismatch error" stays a size mismatch
    assert classify("NET/IB : collective mismatch error local size 546816 remote 524288 addr 0 rkey 1 seq 14/1c"
                    ).name == "NCCLCollectiveSizeMismatch"


TRANSPORT_LINES = [  # (line, transport) in the words of NCCL versions, plugins and the tools that relay them
    ("NET/IBP:Got completion from peer 7.6.13.83<36315> with status=12 opcode=32698 len=32696 vendor err 129 (Send)",
     "IB"),
    ("h:1:2 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.1.1.2<52138> with status=12 "
     "opcode=1 len=0 vendor err 129 (Send) localGid ::ffff:10.1.1.1 remoteGids::ffff:10.1.1.2", "IB"),
    ("NET/IB : Got completion from peer 11.214.147.122<39138> with error 12, opcode 0, len 0, vendor err 129", "IB"),
    ("h:1:2 [0] NCCL WARN NET/IB : Got async event : port error", "IB"),
    # newer NCCL names the device and port; NCCL 1 wrote "IB Got async event"; DOCA's plugin its own prefix
    ("h:1:2 [3] NCCL WARN NET/IB : mlx5_3:1 Got async event : local catastrophic error", "IB"),
    ("h:1:2 [0] NCCL WARN IB Got async event : local work queue catastrophic error", "IB"),
    ("h:1:2 [0] NCCL WARN NET/DOCA : Got async event : CQ error", "IB"),
    ("h:1:2 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out", "IB"),
    ("h [5] misc/socket.cc:46 NCCL WARN socketProgressOpt: Call to send to 10.44.137.149<52905> failed : "
     "Connection reset by peer", "socket"),
    ("socketStartConnect: Connect to 10.0.0.5<41017> failed : Software caused connection abort", "socket"),
    ("Last NCCL warning(error) log entry (may be unrelated) 'socketTryAccept: Accept failed: Bad file descriptor'.",
     "socket"),
    ("h:1:2 [0] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=0x7f6f18cb7f40", "socket"),
    ("h:1:2 [0] bootstrap.cc:77 NCCL WARN Bootstrap : no socket interface found", "bootstrap"),
    ("torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] "
     "via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer", "network"),
]


def test_transport_failures_in_every_wording():
    for line, transport in TRANSPORT_LINES:
        f = classify(line)
        assert f is not None and f.name == "NCCLNetworkError", line
        assert f.attrs["transport"] == transport and f.attrs["detail"], (line, f.attrs)
    ib = classify(TRANSPORT_LINES[1][0]).attrs
    assert (ib["ib_status"], ib["opcode"], ib["length"], ib["vendor_err"]) == (12, 1, 0, 129)
    assert "RETRY_EXC" in ib["ib_status_name"]


def test_healthy_transport_lines_are_not_failures():
    for line in ("h:1:2 [0] NCCL INFO Call to connect returned Connection refused, retrying",
                 "h:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
                 "h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>",
                 "h:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
                 "h:1:2 [0] NCCL INFO misc/socket.cc:607 -> 6 socketWait(NCCL_SOCKET_SEND, sock, &sock->type)",
                 # verbs async events that report the fabric reconfiguring, not a failure (NCCL warns on
                 # all but "communication established"): the subnet manager, a port coming up, a new LID
                 "gpu1:5021:5386 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : client reregistration",
                 "h:1:2 [0] NCCL WARN NET/IB : mlx5_0:1 Got async event : port active",
                 "h:1:2 [0] NCCL WARN NET/IB : Got async event : SM change",
                 "h:1:2 [0] NCCL WARN IB Got async event : GID table change",
                 # an HTTP client hanging up on a serving engine is not NCCL's transport
                 "ConnectionResetError: [Errno 104] Connection reset by peer"):
        f = classify(line)
        assert f is None or f.name != "NCCLNetworkError", line


def test_result_chain_lines_keep_their_site_and_call():
    f = classify("ncivki:180:915 [7] NCCL INFO bootstrap.cc:868 -> 6 ncclSocketConnect()")
    assert (f.name, f.attrs["site"], f.attrs["result"]) == ("NCCLResultChain", "bootstrap.cc:868", "ncclRemoteError")


def _best_of(fn, arg, n=5) -> float:
    best = float("inf")
    for _ in range(n):
        start = time.perf_counter()
        fn(arg)
        best = min(best, time.perf_counter() - start)
    return best


def test_nccl_line_patterns_are_linear_on_long_lines():
    """A 256 KiB line of word characters (or of the patterns' own literals) costs ~16x a 16 KiB
    one; a quadratic pattern costs 256x (the old result-chain pattern took 30-40 s). The bound
    sits between the two, far enough from both that a busy machine's noise does not cross it."""
    from ingest.engine.parsers.logs import lines as log_lines, nccl as log_nccl
    checks = (log_lines._nccl_info, log_nccl.transport_failure, log_nccl.coll_line, log_nccl.xla_rendezvous,
              log_nccl.horovod_stall, log_nccl.collective_mismatch, log_nccl.cuda_fault_in_nccl,
              log_nccl.record_incomplete, log_nccl.rank_hang)
    for unit in ("a", "a/", "x.cc:1 -> ", "socket", ": opCount ", "NET/IB : ", "subset of ranks ",
                 "This thread has been waiting for `", "Ranks 1, 2 monitoredBarrier "):
        small, big = ((unit * (n // len(unit) + 1))[:n] for n in (16 * 1024, 256 * 1024))
        for check in checks:
            t_small, t_big = _best_of(check, small), _best_of(check, big, n=3)
            assert t_big <= 64 * t_small + 0.05, (check.__name__, unit, t_small, t_big)


def test_coll_lines_carry_the_call():
    f = classify("AllReduce: opCount 28c sendbuff 0x7f5d recvbuff 0x7f5d count 9984512 datatype 7 op 0 root 0 "
                 "comm 0x55bef0201370 [nranks=4] stream 0x55bef0208bd0")
    assert (f.name, f.attrs["op"], f.attrs["opcount"], f.attrs["count"], f.attrs["dtype"], f.attrs["nranks"]) == (
        "NCCLColl", "AllReduce", 0x28C, 9984512, "float32", 4)
    # another process's envelope printed into the line names the caller
    f = classify("learnfair062:32629:32629 [7] NCCL INFO Broadcast: opCount 0 sendbuff 0x1 recvbuff 0x1 count 53 "
                 "datatype 4 op 0 root 0 comm 0x7f372005a260 [nranks=8] stream 0x5599")
    assert (f.attrs["coll_pid"], f.attrs["coll_device"], f.attrs["dtype"]) == (32629, 7, "int64")


def test_coll_lines_compared_across_ranks():
    from rules.engine.features import TraceContext
    for name, differs in (("rccl_429_coll_allreduce_vs_allgather.log", "op type"),
                          ("nccl_147_coll_broadcast_first_op_differs.log", "count")):
        df, _ = parse_with(log, MISMATCH / name)
        rows = TraceContext(df.drop(columns=["a"])).feature("nccl_coll_mismatch")
        [a] = [json.loads(x) for x in rows["attrs"]]
        assert a["differs"] == differs, a
    a_147 = a
    assert a_147["opcount"] == 0 and "process 32615" in a_147["culprit"] and "32617" not in a_147["culprit"]
    for name in ("nccl_1193_ray_coll_allreduce_consistent_healthy.log", "nccl_203_tensorflow_coll_two_gpus_healthy.log",
                 "nccl_584_send_recv_coll_p2p_healthy.log"):
        df, _ = parse_with(log, MISMATCH / name)
        assert TraceContext(df.drop(columns=["a"])).feature("nccl_coll_mismatch").empty, name


def test_backtrace_without_its_message_is_the_watchdogs_cuda_error():
    rows = errors(WATCHDOG / "fish_speech_392_watchdog_cuda_check_no_message.log")
    [row] = rows.itertuples()
    assert row.name == "CudaErrorInWatchdog" and row.loc == "line 1-9" and row.a["surfaced_by"] == "nccl_watchdog"
    # collapsed onto one quoted line
    [row] = errors(WATCHDOG / "sglang_3582_quoted_collapsed_cuda_check.log").itertuples()
    assert row.name == "CudaErrorInWatchdog"
    # the same stack after its message: one event, the named error
    rows = errors(WATCHDOG / "deepseek_moe_47_watchdog_unspecified_launch_failure.log")
    assert list(rows["name"]) == ["cudaErrorLaunchFailure"]


def test_teardown_stack_of_a_timeout():
    df, _ = parse_with(log, WATCHDOG / "llamafactory_8261_progress_bars_then_teardown.log")
    assert "NCCLTimeoutBacktrace" in set(df["name"])
    assert {"NCCLOperationsFailed", "NCCLProcessTeardown"} <= set(df["name"])


XLA_LINES = [  # XLA's rendezvous wordings (xla/service/rendezvous.cc over the years)
    ("E0213 12:41:17.931882   59040 rendezvous.cc:98] This thread has been waiting for `rendezvous of "
     "collective-permute; run_id=15; op id:1` for 20 seconds and may be stuck. Expected 8 threads to join the "
     "rendezvous, but not all of them arrived on time.", "XLARendezvousStuck", 8, None),
    ("2023-09-01 10:20:11.257981: E external/xla/xla/service/rendezvous.cc:31] This thread has been waiting for "
     "10 seconds and may be stuck:", "XLARendezvousStuck", None, None),
    ("F0213 rendezvous.cc:118] Termination timeout for `all gather RendezvousKey{run_id=1}` of 40 seconds exceeded. "
     "Exiting to ensure a consistent program state. Expected 4 threads to join the rendezvous, but only 3 of them "
     "arrived on time.", "XLARendezvousTimeout", 4, 1),
    ("E rendezvous.cc:60] Termination timeout of 30 seconds exceeded. Exiting to ensure a consistent program state.",
     "XLARendezvousTimeout", None, None),
]


def test_xla_rendezvous_wordings():
    for line, name, expected, missing in XLA_LINES:
        f = classify(line)
        assert f is not None and f.name == name, line
        assert (f.attrs["expected"], f.attrs["missing"]) == (expected, missing), (line, f.attrs)


def test_xla_termination_wrapped_over_lines_is_joined(tmp_path):
    path = tmp_path / "xla.log"
    path.write_text("Termination timeout for `all gather RendezvousKey{run_id=..., global_devices=[1, 3],\n"
                    "num_local_participants=2, collective_op_kind=cross_module, op_id=28}` of 40 seconds\n"
                    "exceeded. Exiting to ensure a consistent program state. Expected 2 threads to join\n"
                    "the rendezvous, but only 1 of them arrived on time.\n")
    [row] = errors(path).itertuples()
    assert row.name == "XLARendezvousTimeout" and row.a["waited_s"] == 40


def test_monitored_barrier_names_the_missing_ranks():
    f = classify("RuntimeError: [Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 30000 ms. Original exception: "
                 "[../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection reset by peer [10.0.0.2]:26917")
    assert (f.name, f.attrs["missing_ranks"], f.attrs["timeout_ms"]) == ("MonitoredBarrierTimeout", [1, 3], 30000)
    f = classify("[E ProcessGroupGloo.cpp:138] Rank 1 successfully reached monitoredBarrier, but received errors while "
                 "waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.")
    assert (f.name, f.attrs["missing_ranks"]) == ("MonitoredBarrierTimeout", [0])


def test_start_up_barrier_and_engine_watchdog():
    f = classify("torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/8 clients joined.")
    assert (f.name, f.attrs["missing"]) == ("StoreBarrierTimeout", 7)
    f = classify("RuntimeError: Timed out initializing process group in store based barrier on rank: 2, for key: "
                 "store_based_barrier_key:1 (world_size=8, worker_count=6, timeout=0:30:00)")
    assert (f.name, f.attrs["joined"], f.attrs["expected"]) == ("StoreBarrierTimeout", 6, 8)
    f = classify("Watchdog timeout (self.watchdog_timeout=300)")
    assert (f.name, f.attrs["timeout_s"]) == ("ServingWatchdogTimeout", 300.0)


STORE_WAITS = [  # (line as posted, attrs expected) -- a rank gave up waiting at the c10d store
    # NVIDIA-NeMo/Speech#14399 (torch 2.x TCPStore)
    ("B-nemo-ft3/0 [default1]:[rank1]: torch.distributed.DistBackendError: [1] is setting up NCCL communicator and "
     "retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait "
     "timeout after 600000ms, keys: /default_pg/0//cuda//0",
     {"waited_s": 600.0, "key": "/default_pg/0//cuda//0", "awaited_rank": 0, "peer_missing": True}),
    # zai-org/ChatGLM-6B#1232 (torch <= 2.0: the blocking get's "Socket Timeout")
    ("RuntimeError: [1] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value store "
     "by key '0', but store->get('0') got error: Socket Timeout",
     {"key": "0", "awaited_rank": 0, "peer_missing": True}),
    # a TCPStore client that never reached a store on its own machine (torch 2.x words in ms)
    ("torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying to connect "
     "to (127.0.0.1, 29500).", {"waited_s": 600.0, "host": "127.0.0.1", "port": 29500, "peer_missing": True}),
    # ... and on another host: the network is a suspect too, so no peer is named missing
    ("torch.distributed.DistNetworkError: The client socket has timed out after 1800s while trying to connect to "
     "(10.20.0.7, 29500).", {"host": "10.20.0.7", "peer_missing": False}),
]


def test_store_waits_name_the_key_and_the_awaited_rank():
    for line, expected in STORE_WAITS:
        f = classify(line)
        assert f is not None and f.name == "StoreWaitTimeout", line
        assert {k: f.attrs[k] for k in expected} == expected, (line, f.attrs)


def test_a_store_reset_is_still_the_network_not_a_missing_peer():
    f = classify("RuntimeError: [3] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d "
                 "key-value store by key '1', but store->get('1') got error: Connection reset by peer")
    assert f is not None and f.name == "NCCLNetworkError"


def test_a_failed_call_traced_from_nccls_own_checks_is_one_failure_with_its_warning(tmp_path, parse):
    """NCCL's init checks refuse a communicator (two ranks on one GPU: ncclInvalidUsage) and trace the
    code up to the API ("init.cc:N -> 5"), warning first. Not the transport: the call failed all the
    same, once per thread, and the thread's WARN says why (vllm-project/vllm DP on one device; NCCL
    2.22 and newer append the result's name)."""
    log = tmp_path / "dp.log"
    log.write_text(
        "myhost:2292596:2292596 [0] init.cc:943 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA "
        "device 53000\n"
        "myhost:2292596:2292596 [0] NCCL INFO init.cc:1358 -> 5 (ncclInvalidUsage)\n"
        "myhost:2292596:2292596 [0] NCCL INFO init.cc:1740 -> 5 (ncclInvalidUsage)\n"
        "myhost:2292596:2292596 [0] NCCL INFO init.cc:1778 -> 5 (ncclInvalidUsage)\n"
        "myhost:2292597:2292597 [0] init.cc:943 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA "
        "device 53000\n"
        "myhost:2292597:2292597 [0] NCCL INFO init.cc:1358 -> 5 (ncclInvalidUsage)\n"
        "myhost:2292597:2292597 [0] NCCL INFO init.cc:1740 -> 5 (ncclInvalidUsage)\n")
    _, df = parse(log)
    failed = df[df["name"] == "NCCLCallFailed"]
    assert list(failed["loc"]) == ["line 2", "line 6"]  # one per thread, not one per trace line
    attrs = [json.loads(a) for a in failed["attrs"]]
    assert all(a["nccl_error"] == "ncclInvalidUsage" and a["result_code"] == 5 for a in attrs)
    assert "Duplicate GPU detected : rank 0 and rank 1" in attrs[0]["message"]
    # the second thread's identical trace line is kept as an echo of the first failure, not a second one
    assert list(failed["kind"]) == ["error", "log"] and attrs[1]["repeat_of"] == "line 2"


def test_an_in_progress_code_is_not_a_failed_call(tmp_path, parse):
    log = tmp_path / "nb.log"  # ncclInProgress (7): a non-blocking communicator's call still running
    log.write_text("h:1:1 [0] NCCL INFO init.cc:1740 -> 7\nh:1:1 [0] NCCL INFO init.cc:1778 -> 7\n")
    _, df = parse(log)
    assert "NCCLCallFailed" not in set(df["name"])
