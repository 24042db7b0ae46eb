"""The timeout verdict reads every rank's evidence: ranks whose watchdog lines disagree, a rank that
failed first, flight-recorder states only as far as the job recorded start events; and the
clustering link that makes a survivor's timeout the consequence of the failure it names.
Real captures are in tests/fixtures/h200_open_world (tests/acceptance); these are the edge cases."""
from __future__ import annotations

import json

from diagnosis.engine.clusters import cluster_findings
from rules.engine.features import TraceContext
from rules.engine.results import Evidence, RuleFinding
from rules.engine.features.nccl import verdict, watchdog_mismatches
from tests.rules.helpers import S, events



def timeout(rank, seq=6, op="ALLREDUCE", numel=1024, ts=100 * S, line=10, artifact="combined.log", **kw):
    return {"ts": ts, "kind": "error", "name": "NCCLWatchdogTimeout", "source": "log", "artifact": artifact,
            "loc": f"line {line}", "attrs": {"rank": rank, "seq": seq, "op": op, "numel_in": numel,
                                             "numel_out": numel, "timeout_ms": 600000, "elapsed_ms": 600010,
                                             "pg": "", **kw}}


def verdicts(rows: list[dict]) -> list[dict]:
    ctx = TraceContext(events(rows))
    return [json.loads(a) for a in ctx.feature("nccl_timeouts")["attrs"]]


def test_ranks_waiting_in_different_ops_at_one_seq_are_a_mismatch():
    found = verdicts([timeout(0), timeout(1), timeout(2, op="_ALLGATHER_BASE")])
    assert {v["cause"] for v in found} == {"collective_mismatch"}
    assert found[0]["culprit_ranks"] == [2] and found[0]["mismatch_source"] == "watchdog_lines"
    assert "_ALLGATHER_BASE" in found[0]["reason"] and "op type differs" in found[0]["reason"]


def test_sizes_are_compared_but_not_for_ops_whose_sizes_differ_by_design():
    assert {v["cause"] for v in verdicts([timeout(0, numel=2048), timeout(1)])} == {"collective_mismatch"}
    gather = [timeout(0, op="GATHER", numel=10), timeout(1, op="GATHER", numel=0)]
    assert {v["cause"] for v in verdicts(gather)} == {"undetermined"}


def test_agreeing_ranks_and_other_groups_are_not_a_mismatch():
    assert {v["cause"] for v in verdicts([timeout(0), timeout(1), timeout(2)])} == {"undetermined"}
    rows = [timeout(0)["attrs"] | {"pg": "tp"}, timeout(1, op="BROADCAST")["attrs"] | {"pg": "dp"}]
    assert watchdog_mismatches(rows) == {}
    # one rank restating its own timeout (the "terminated with exception" line) is not a second rank
    assert watchdog_mismatches([timeout(0)["attrs"], timeout(0, op="X", restated=True)["attrs"]]) == {}


def oom(rank, ts, line, artifact="combined.log"):
    return {"ts": ts, "kind": "oom", "name": "OutOfMemoryError", "source": "log", "artifact": artifact,
            "loc": f"line {line}", "attrs": {"rank": rank, "exception": "torch.OutOfMemoryError"}}


def test_a_peer_that_died_first_makes_the_timeout_its_consequence():
    [v] = verdicts([oom(1, 90 * S, 5, "rank1.log"), timeout(0, artifact="rank0.log")])
    assert (v["cause"], v["culprit_ranks"], v["caused_by"], v["failure_key"]) == (
        "peer_failed", [1], "rank1.log|line 5", "cuda_oom")
    assert "rank 1 ran out of GPU memory" in v["reason"]


def test_failures_after_the_timeout_or_caused_by_it_are_not_the_cause():
    later = oom(1, 200 * S, 50)
    teardown = {"ts": 90 * S, "kind": "error", "name": "DistBackendError", "source": "log", "artifact": "a.log",
                "loc": "line 3", "attrs": {"rank": 1, "exception": "torch.distributed.DistBackendError",
                                           "exception_message": "NCCL communicator was aborted on rank 1."}}
    for rows in ([timeout(0), later], [teardown, timeout(0)]):
        assert verdicts(rows)[0]["cause"] == "undetermined"


def test_this_ranks_own_kernel_fault_printed_after_the_watchdog_line():
    fault = {"ts": 100 * S, "kind": "error", "name": "cudaErrorIllegalAddress", "source": "log",
             "artifact": "combined.log", "loc": "line 11",
             "attrs": {"rank": 0, "cuda_error": "cudaErrorIllegalAddress"}}
    [v] = verdicts([timeout(0), fault])
    assert (v["cause"], v["caused_by"]) == ("own_failure", "combined.log|line 11")


def _timeout_attrs(**kw):
    return {"rank": 0, "seq": 5, "pg_id": 0, "pg": "0", "op": "ALLREDUCE", **kw}


def test_scheduled_proves_nothing_without_start_events():
    entries = {(0, "0", 5): {"state": "scheduled"}, (0, "0", 4): {"state": "completed"}}
    off = {(0, "0"): {"last_started_collective": -1, "last_completed_collective": 4, "group_size": 2}}
    cause, reason, capture, _ = verdict(_timeout_attrs(), entries, off)
    assert cause == "undetermined" and "TORCH_NCCL_ENABLE_TIMING" in capture
    on = {(0, "0"): {"last_started_collective": 4, "last_completed_collective": 4, "group_size": 2}}
    assert verdict(_timeout_attrs(), entries, on)[0] == "stream_blocked"


def test_a_group_of_one_rank_has_no_peer_to_wait_for():
    entries = {(0, "0", 5): {"state": "scheduled"}}
    status = {(0, "0"): {"last_started_collective": -1, "last_completed_collective": 4, "group_size": 1}}
    assert verdict(_timeout_attrs(), entries, status)[0] == "stream_blocked"


def test_clusters_head_the_incident_with_the_failure_a_timeout_names():
    failure = RuleFinding(rule_id="cuda-oom.x", root_cause="cuda_oom.capacity", title="OOM", severity="error",
                      start_ts=5, end_ts=5, evidence=(Evidence(artifact="rank1.log", loc="line 5", ts=5, text=""),))
    survivor = RuleFinding(rule_id="nccl.timeout-after-peer-failure", root_cause="nccl.timeout.peer_missing",
                       title="timeout", severity="critical", start_ts=1, end_ts=1,
                       group={"attrs.caused_by": "rank1.log|line 5"},
                       evidence=(Evidence(artifact="rank0.log", loc="line 9", ts=1, text=""),))
    [c], consequence_of = cluster_findings([failure, survivor])
    assert c.headline == 0 and consequence_of == {1: 0}


def test_a_transport_failure_before_the_timeout_heads_it():
    net = {"ts": 95 * S, "kind": "error", "name": "NCCLNetworkError", "source": "log", "artifact": "combined.log",
           "loc": "line 4",
           "attrs": {"rank": 3, "text": "NET/IB : Got completion from peer 10.0.0.2<1234> with error 12"}}
    [v] = verdicts([net, timeout(0)])
    assert (v["cause"], v["caused_by"]) == ("transport_failed", "combined.log|line 4")


def test_a_hung_watchdog_is_its_own_undetermined_verdict():
    hung = {"ts": 100 * S, "kind": "error", "name": "NCCLWatchdogHung", "source": "log", "artifact": "a.log",
            "loc": "line 1", "attrs": {"rank": 7, "stuck_s": 480, "signal": "heartbeat"}}
    [v] = verdicts([hung])
    assert v["cause"] == "undetermined" and "480 s" in v["reason"] and "py-spy" in v["next_capture"]


def test_point_to_point_pairs_are_not_compared():
    assert watchdog_mismatches([timeout(0, op="SEND")["attrs"], timeout(1, op="RECV")["attrs"]]) == {}


def test_a_peer_that_destroyed_its_process_group_first_left_the_collective():
    left = {"ts": 50 * S, "kind": "log", "name": "NCCLProcessGroupDestroyed", "source": "log", "artifact": "r1.log",
            "loc": "line 80", "attrs": {"rank": 1, "pg_name": "default_pg"}}
    [v] = verdicts([left, timeout(0, artifact="r0.log")])
    assert (v["cause"], v["culprit_ranks"]) == ("peer_failed", [1]) and "shut its process group down" in v["reason"]


def teardown(rank, name="NCCLOperationsFailed", ts=100 * S, line=20, artifact="combined.log", **kw):
    return {"ts": ts, "kind": "error", "name": name, "source": "log", "artifact": artifact, "loc": f"line {line}",
            "attrs": {"rank": rank, "text": f"[Rank {rank}] Some NCCL operations have failed or timed out.", **kw}}


def test_teardown_lines_stand_for_a_timeout_whose_record_is_cut():
    found = verdicts([teardown(2), teardown(2, "NCCLProcessTeardown", line=21), teardown(5, line=30)])
    assert [(v["rank"], v["signal"], v["cause"]) for v in found] == [(2, "teardown", "undetermined"),
                                                                     (5, "teardown", "undetermined")]
    assert "not in this excerpt" in found[0]["reason"]
    # a peer's earlier failure still heads it; a real timeout record makes the teardown lines redundant
    [v] = verdicts([oom(1, 90 * S, 5, "rank1.log"), teardown(0, artifact="rank0.log")])
    assert (v["cause"], v["culprit_ranks"]) == ("peer_failed", [1])
    assert {v["signal"] if "signal" in v else "" for v in verdicts([timeout(0), teardown(0)])} == {""}


def test_a_dump_signal_names_the_rank_that_timed_out():
    signal = teardown(3, "NCCLDumpSignal", text="[PG ID 0 PG GUID 0(default_pg) Rank 3] Received a dump signal due "
                      "to a collective timeout from rank 0 and we will try our best to dump the debug info.")
    [v] = verdicts([signal])
    assert v["dump_from"] == 0 and "rank 0's collective timed out" in v["reason"]


def progress(rank, enqueued, completed, name="NCCLDumpSignal", line=40, **pg):
    return {"ts": 101 * S, "kind": "log" if name == "NCCLDumpSignal" else "error", "name": name, "source": "log",
            "artifact": "combined.log", "loc": f"line {line}",
            "attrs": {"rank": rank, "last_enqueued": enqueued, "last_completed": completed, **pg}}


def test_a_rank_whose_own_counters_stop_before_the_timed_out_seq_never_joined():
    # rank 0 timed out at seq 6; rank 1's dump-signal line says it enqueued only up to 5 in the same group
    [v] = verdicts([timeout(0, pg_name="default_pg"), progress(1, 5, 5, pg_name="default_pg", pg_id=0)])
    assert (v["cause"], v["culprit_ranks"]) == ("peer_missing", [1])
    assert "last enqueued 5" in v["reason"] and "combined.log line 40" in v["reason"]
    # ranks at or past the seq, and counters of another group (by GUID, then name, then id) decide nothing
    for other in (progress(1, 6, 5, pg_name="default_pg"), progress(1, 5, 5, pg_guid=112, pg_id=11)):
        [v] = verdicts([timeout(0, pg_guid=119, pg_id=11, pg_name="default_pg"), other])
        assert v["cause"] == "undetermined", other
