"""NCCL watchdog timeouts, decided with every rank's logs and dumps in the trace.

A timed-out collective either never started on this rank (its stream was still busy with
earlier work: `stream_blocked`) or started and waited for a peer that never joined
(`peer_missing`). Before either, the other evidence is read, in this order:

1. ranks that disagree on the collective (several ranks' dumps, or the ranks' own watchdog
   lines at one sequence id naming different ops or sizes): `collective_mismatch`, reported
   by the nccl.collective-mismatch rules (the timeout is their consequence);
2. a rank that failed first (out of memory, a CUDA fault, an exception, a kill): the others
   waited for a rank that was gone, so the timeout is that failure's consequence
   (`peer_failed`, or `own_failure` for this rank's own CUDA fault); attrs.caused_by names the
   failure's evidence so clustering heads the incident with it;
3. the cross-rank flight-recorder alignment (rules/engine/features/collectives.py): the rank that
   never enqueued the collective, or where it never started;
4. this rank's own dump: `scheduled` proves "never started" only when the job recorded start
   events (TORCH_NCCL_ENABLE_TIMING); without them every unfinished entry reads `scheduled`.

Otherwise the verdict is `undetermined` and the finding says what to capture next.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence

import pandas as pd

from ingest.engine.trace_frame import in_values, parse_attrs as _attrs, text_values
from rules.engine.features import feature
from rules.engine.features.collectives import (Divergence, first_divergences, fr_entries, timing_enabled,
                                        to_int as _int)
from rules.engine.features.jobs import artifact_ranks, per_job

TIMEOUT_NAMES = ("NCCLWatchdogTimeout", "NCCLWatchdogFailure", "NCCLBlockingWaitTimeout", "NCCLWatchdogHung")
# what a rank prints when its process group is torn down; read only where no timeout record is in
# the trace (an excerpt that starts after it): each rank's first such line stands for its timeout
TEARDOWN_NAMES = ("NCCLOperationsFailed", "NCCLProcessTeardown", "NCCLWatchdogTerminated", "NCCLDumpSignal",
                  "NCCLTimeoutBacktrace", "NCCLCommunicatorAborted",
                  # what the watchdog prints only after it caught a failed or timed-out collective
                  # (logs.c10d_aftermath): a failed desync report, the flight recorder's failed-collective stack
                  "NCCLDesyncReportFailed", "NCCLFailedCollectiveStack")
# read only for a rank with no other teardown line (as a bare checkTimeout stack is)
_FALLBACK_TEARDOWN = ("NCCLTimeoutBacktrace", "NCCLDesyncReportFailed", "NCCLFailedCollectiveStack")
# a log line that itself says the ranks disagree (DETAIL fingerprints, NCCL's checks, fr_trace)
MISMATCH_REPORTS = ("CollectiveFingerprintMismatch", "NCCLMismatchedCollective", "NCCLCollectiveSizeMismatch",
                    "CollectiveMismatchReported",
                    "FRCollectiveMismatch")
KERNEL_FAULTS = ("cudaErrorIllegalAddress", "cudaErrorAssert", "cudaErrorLaunchFailure",
                 "cudaErrorIllegalInstruction", "cudaErrorMisalignedAddress", "cudaErrorECCUncorrectable",
                 "CudaErrorInWatchdog")
# ops whose per-rank sizes differ by design (root-only buffers, uneven splits)
SIZE_FREE_OPS = ("GATHER", "SCATTER", "ALLTOALL", "ALLTOALL_BASE")
# point-to-point pairs differ by design (a SEND meets a RECV) and are numbered apart from collectives
P2P_OPS = ("SEND", "RECV", "RECV_ANY_SOURCE", "RECVANYSOURCE")
# errors that are NCCL's own reaction to the hang, or a launcher reacting to a dead child
_CONSEQUENCES = re.compile(r"NCCL|[Ww]atchdog|ProcessGroup|DistBackendError|DistNetworkError|DistStoreError|"
                           r"ChildFailedError|timed out|Connection (?:reset|closed|refused)|Broken pipe|"
                           r"communicator was aborted|SIGTERM|Signals\.SIG|KeyboardInterrupt|SystemExit|"
                           r"CalledProcessError|SignalException")
_KILL_CODES = (-9, -6, -11, 137, 134, 139)
FAILURE_WINDOW_NS = 30 * 60 * 10**9   # a failure this long before the collective began is unrelated
MAX_FAILURES = 1000                     # the earliest ones: a failure that explains a timeout comes first
OWN_FAULT_SLACK_NS = 10 * 10**9       # the watchdog prints its own CUDA fault right after noticing it


def _fr_state(ev: pd.DataFrame) -> tuple[dict, dict]:
    """(entries by (rank, pg, seq) -> attrs, pg_status by (rank, pg) -> attrs) from dumps."""
    fr = ev[ev["source"] == "flight_recorder"]
    entries, status = {}, {}
    for kind, name, attrs in zip(fr["kind"], text_values(fr["name"]), fr["attrs"]):
        a = _attrs(attrs)
        rank, pg = _int(a.get("rank")), str(a.get("pg_id", a.get("pg_name", "0")))
        if kind == "collective":
            entries[(rank, pg, _int(a.get("collective_seq_id")))] = a
        elif name == "pg_status":
            status[(rank, pg)] = a
    return entries, status


def verdict(t: dict, entries: dict, status: dict, divergences: Sequence[Divergence] = (),
            mismatch: tuple | None = None, failure: dict | None = None,
            counters: dict | None = None) -> tuple[str, str, str, list[int]]:
    """(cause, reason, next capture, culprit ranks) for one timeout; see the module doc for the order."""
    rank, seq = _int(t.get("rank")), _int(t.get("seq"))
    pg = str(t.get("pg", t.get("pg_id", "0")))
    cross = _cross_rank_verdict(t, seq, divergences)
    if cross and cross[0] == "collective_mismatch":
        return cross
    if mismatch:
        return "collective_mismatch", mismatch[0], "", mismatch[1]
    if failure:
        return _failure_verdict(t, failure)
    if cross:
        return cross
    behind = _ranks_behind(t, counters or {}) or _ranks_past(t, counters or {})
    if behind:
        return behind
    if t.get("signal") == "teardown":
        return _teardown_verdict(t)
    if t.get("signal") == "heartbeat":
        return ("undetermined",
                "the watchdog thread itself stopped making progress"
                + (f" for {t['stuck_s']} s" if t.get("stuck_s") else "")
                + ": a CUDA or NCCL call it made never returned (a hung GPU or driver, or another thread holding "
                "the GIL inside a CUDA call), so no collective could be checked",
                "a native stack dump of the stuck process (py-spy dump --native), dmesg/nvidia-smi for an Xid on "
                "its GPU, and every rank's log", [])
    entry = entries.get((rank, pg, seq)) or next(
        (a for (r, _p, s), a in entries.items() if s == seq and (rank is None or r == rank or r is None)), None)
    st: dict = status.get((rank, pg)) or next(iter(status.values()), {})
    if entry is not None or st:
        return _own_dump_verdict(rank, seq, entry, st, entries, status)
    return ("undetermined",
            "the log shows the timeout but not whether the collective started on this rank or which peer was absent",
            "flight-recorder dumps from every rank (TORCH_NCCL_TRACE_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1, "
            "TORCH_FR_DUMP_TEMP_FILE=/tmp/nccl_trace_rank_) and every rank's log", [])


def _own_dump_verdict(rank, seq, entry: dict | None, st: dict, entries: dict, status: dict):
    last_started = _int(st.get("last_started_collective"))
    last_completed = _int(st.get("last_completed_collective"))
    timed = timing_enabled(list(entries.values()), list(status.values()))
    state = (entry or {}).get("state")
    if _int(st.get("group_size")) == 1 and state != "completed":
        return ("stream_blocked",
                f"seq {seq} never completed on rank {rank}, the only rank of its process group (last completed "
                f"{last_completed}): with no peer to wait for, only earlier work on this rank's stream can hold it",
                "", [rank] if rank is not None else [])
    # the entry's own state wins: pg_status can lag behind it by a watchdog pass
    never_started = timed and (state == "scheduled" or (
        state not in ("started", "completed") and last_started is not None and seq is not None
        and 0 <= last_started < seq))
    if never_started:
        return ("stream_blocked",
                f"the flight recorder shows seq {seq} was enqueued but never started on rank {rank} "
                f"(state {state or 'not started'}, last started {last_started}, last completed {last_completed}): "
                "earlier work on this rank's stream never finished, so no peer was waited on",
                "", [rank] if rank is not None else [])
    if not timed:
        return ("undetermined",
                f"the dump shows seq {seq} on rank {rank} as {state or 'not completed'} (last completed "
                f"{last_completed}), but the job recorded no start events, so an unfinished collective reads "
                "'scheduled' whether it never started or started and waited for a peer",
                "TORCH_NCCL_ENABLE_TIMING=1 on every rank, and every rank's dump and log", [])
    ranks_with_dumps = {r for (r, _p) in status} | {r for (r, _p, _s) in entries}
    if len(ranks_with_dumps) > 1:
        return ("undetermined",
                f"seq {seq} started on rank {rank} and the dumps of ranks {sorted(ranks_with_dumps)} agree on it: "
                "no rank is missing or behind, so the collective itself stalled (transport, network or NCCL)",
                "NCCL_DEBUG=INFO logs of every rank and the network counters of their hosts", [])
    return ("undetermined",
            f"seq {seq} started on rank {rank} but only this rank's dump is here: a missing peer and a "
            "stalled collective look the same from one rank",
            "flight-recorder dumps from every rank of the process group", [])


# --- every rank's progress counters, as their own log lines print them ---------------------------
def rank_counters(ev: pd.DataFrame) -> dict[int, list[dict]]:
    """rank -> [{last_enqueued, last_completed, pg_id, pg_name, where}] from the lines that print a
    rank's progress (watchdog failure lines, received dump signals), for ranks other than the one
    that timed out: a rank whose last enqueued collective is below the timed-out one never issued it."""
    rows = ev[(ev["source"] == "log") & in_values(ev["name"], ["NCCLWatchdogFailure", "NCCLDumpSignal"])]
    out: dict[int, list[dict]] = defaultdict(list)
    for attrs, artifact, loc in zip(rows["attrs"], text_values(rows["artifact"]), rows["loc"]):
        a = _attrs(attrs)
        rank = _int(a.get("rank"))
        if rank is None or _int(a.get("last_enqueued")) is None:
            continue
        out[rank].append({"last_enqueued": _int(a.get("last_enqueued")), "last_completed": _int(a.get("last_completed")),
                          "pg_guid": _int(a.get("pg_guid")), "pg_id": _int(a.get("pg_id")),
                          "pg_name": a.get("pg_name") or "", "where": f"{artifact} {loc}"})
    return out


MAX_PEER_SEQ_SPREAD = 64  # ranks of one group are a few collectives apart at most (each waits for the others)


def _add_own_timeouts(counters: dict[int, list[dict]], timeouts: list[dict], artifacts, locs) -> None:
    """A rank's own watchdog timeout at seq S says it completed every collective of that group
    before S (work completes in order); what it enqueued after S it does not say. Lines that
    name no process group count only where they can be one group: each rank times out once,
    all within a few sequence ids (legacy lines of several groups are neither)."""
    def usable(t: dict) -> bool:
        return (_int(t.get("rank")) is not None and _int(t.get("seq")) is not None and not t.get("restated")
                and str(t.get("op", "")).upper() not in P2P_OPS)
    unnamed = [t for t in timeouts if usable(t) and not _pg_key(t)]
    seqs = {s for t in unnamed if (s := _int(t["seq"])) is not None}  # each of them: usable
    one_group = bool(seqs) and max(seqs) - min(seqs) <= MAX_PEER_SEQ_SPREAD and \
        len({(_int(t["rank"]), _int(t["seq"])) for t in unnamed}) == len({_int(t["rank"]) for t in unnamed})
    for t, artifact, loc in zip(timeouts, artifacts, locs):
        if not usable(t) or (not _pg_key(t) and not one_group):
            continue
        rank, seq = _int(t.get("rank")), _int(t.get("seq"))
        assert rank is not None and seq is not None  # usable
        counters[rank].append({"last_enqueued": None, "last_completed": seq - 1, "stuck_at": seq,
                               "pg_guid": _int(t.get("pg_guid")), "pg_id": _int(t.get("pg_id")),
                               "pg_name": t.get("pg_name") or "", "artifact": artifact, "loc": str(loc),
                               "where": f"{artifact} {loc}, its own watchdog timing out at seq {seq}"})


def _stuck_peer(t: dict, counters: dict[int, list[dict]]) -> dict | None:
    """A peer whose own watchdog timed out at an earlier seq of the same group: it never got to
    this one, so this timeout follows that one (a failure for first_failure's callers)."""
    stuck = _peers_where(t, counters, "stuck_at", lambda value, seq: value < seq)
    if not stuck:
        return None
    rank, c = min(stuck.items(), key=lambda rc: rc[1]["stuck_at"])
    return {"key": "stuck", "name": "NCCLWatchdogTimeout", "rank": rank, "artifact": c["artifact"], "loc": c["loc"],
            "stuck_at": c["stuck_at"], "own": False, "ts": 0, "line": None, "text": c["where"]}


def _same_group(t: dict, c: dict, one_group: bool) -> bool:
    """Sequence ids count per process group: compare the most specific name both sides print
    (GUID, then name, then id); with neither, only a trace that shows one group at all."""
    for key, read in (("pg_guid", _int), ("pg_name", lambda v: v or None), ("pg_id", _int)):
        mine, theirs = read(t.get(key)), c[key] or None if key == "pg_name" else c[key]
        if mine is not None and theirs is not None:
            return mine == theirs
    return one_group


def _peers_where(t: dict, counters: dict[int, list[dict]], counter: str, holds) -> dict[int, dict]:
    """The other ranks of the timed-out collective's group whose highest `counter`, as their own
    lines print it, satisfies `holds(value, seq)`; each with the line that shows it."""
    rank, seq = _int(t.get("rank")), _int(t.get("seq"))
    if seq is None or str(t.get("op", "")).upper() in P2P_OPS:
        return {}
    groups = {(c["pg_guid"], c["pg_name"], c["pg_id"]) for seen in counters.values() for c in seen}
    found = {}
    for r, seen in counters.items():
        mine = [c for c in seen if _same_group(t, c, len(groups) == 1) and c.get(counter) is not None]
        if r != rank and mine and holds((top := max(mine, key=lambda c: c[counter]))[counter], seq):
            found[r] = top
    return found


def _peers_reason(t: dict, peers: dict[int, dict], had: str, so: str) -> str:
    said = "; ".join(f"rank {r}: " + (f"last enqueued {c['last_enqueued']}, " if c["last_enqueued"] is not None else "")
                     + f"last completed {c['last_completed']} ({c['where']})" for r, c in sorted(peers.items()))
    return (f"rank {t.get('rank')}'s seq {t.get('seq')} timed out while rank(s) {sorted(peers)} of the same group "
            f"{had} ({said}): {so}")


def _ranks_behind(t: dict, counters: dict[int, list[dict]]):
    behind = _peers_where(t, counters, "last_enqueued", lambda value, seq: value < seq)
    return ("peer_missing", _peers_reason(t, behind, "had enqueued only collectives before it",
                                          f"they never issued seq {t.get('seq')}, so the collective waited for them"),
            "", sorted(behind)) if behind else None


def _ranks_past(t: dict, counters: dict[int, list[dict]]):
    """A peer whose own counters say it completed the sequence id this rank timed out on: a
    collective cannot finish on one rank alone, so at that id the ranks ran different
    collectives (op, size or peers), whichever line printed the counters (a received dump
    signal with nothing outstanding, a watchdog line of its own)."""
    past = _peers_where(t, counters, "last_completed", lambda value, seq: value >= seq)
    seq = t.get("seq")
    return ("collective_mismatch",
            _peers_reason(t, past, f"had already completed seq {seq}", f"a collective cannot finish on one rank "
                          f"alone, so at seq {seq} the ranks called different collectives (op, size or group)"),
            "flight-recorder dumps from every rank (each names its op and sizes at that seq), or a rerun with "
            "TORCH_DISTRIBUTED_DEBUG=DETAIL", sorted(past)) if past else None


# --- a rank whose own log goes on past the timeout ------------------------------------------------
WENT_ON_SLACK_NS = 5 * 10**9   # a peer blocked in the same collective times out within seconds of this rank


def rank_logs(ev: pd.DataFrame, found: list[dict]) -> dict[int, dict]:
    """rank -> its own log (the one log that names that rank alone: rules.engine.features.jobs): where it
    ends and whether it shows a timeout or a failure of its own."""
    logs = ev[ev["source"] == "log"]
    if logs.empty:
        return {}
    troubled = {f["artifact"] for f in found} | set(text_values(
        logs[in_values(logs["name"], TIMEOUT_NAMES + TEARDOWN_NAMES)]["artifact"]))
    owners: dict[int, list[str]] = defaultdict(list)
    for artifact, seen in artifact_ranks(logs, "log").items():
        if len(seen) == 1:
            owners[next(iter(seen))].append(artifact)
    last = logs.groupby(text_values(logs["artifact"]))["ts"].max()
    return {r: {"artifact": arts[0], "last_ts": int(last[arts[0]]), "troubled": arts[0] in troubled,
                "where": f"{arts[0]} to its last line"} for r, arts in owners.items() if len(arts) == 1}


def _ranks_went_on(t: dict, ts: int, logs: dict[int, dict]):
    """Peers whose own log goes on after this rank's watchdog fired, with no timeout or failure of
    their own: a rank blocked in the same collective would have timed out too, so they were not
    in it (they never issued it, or ran a different collective there)."""
    rank, seq = _int(t.get("rank")), _int(t.get("seq"))
    if seq is None or str(t.get("op", "")).upper() in P2P_OPS:
        return None
    went = {r: p for r, p in logs.items() if r != rank and not p["troubled"] and p["last_ts"] > ts + WENT_ON_SLACK_NS}
    if not went:
        return None
    said = "; ".join(f"rank {r}: {p['artifact']} goes on {(p['last_ts'] - ts) / 1e9:.0f} s after it"
                     for r, p in sorted(went.items()))
    return ("peer_missing",
            f"rank {rank}'s seq {seq} timed out while rank(s) {sorted(went)} went on with no timeout or failure of "
            f"their own ({said}): a rank waiting in seq {seq} would have timed out as well, so they never joined it "
            f"(they skipped it, or called a different collective there)",
            "flight-recorder dumps from every rank (TORCH_NCCL_DUMP_ON_TIMEOUT=1): they tell a skipped collective "
            "from a different one", sorted(went))


def _teardown_verdict(t: dict) -> tuple[str, str, str, list[int]]:
    who = f"rank {t['rank']}" if t.get("rank") is not None else "a rank"
    what = ("a collective timed out (the watchdog's stack shows WorkNCCL::checkTimeout)" if t.get("timed_out")
            else "NCCL operations failed or timed out")
    if t.get("dump_from") is not None:
        what = f"rank {t['dump_from']}'s collective timed out (this rank received its dump signal)"
        idle = _int(t.get("last_enqueued"))
        if idle is not None and idle == _int(t.get("last_completed")):
            what += (f"; this rank had nothing in flight (last enqueued = last completed = {idle}), so if that "
                     f"collective belongs to this group, this rank never issued it")
    # the watchdog's aftermath of a timeout (logs.c10d_aftermath) says what it saw, not a teardown
    told = f"on {who}, {t['said']}" if t.get("said") else f"{who} tore its process group down because {what}"
    return ("undetermined",
            f"{told}, but the watchdog's record of the collective (op, sequence id, how long it ran) is not in "
            "this excerpt, and nothing shows which rank was missing",
            "the lines just before the teardown in every rank's log (the 'Watchdog caught collective operation "
            "timeout' or NCCL error line), and flight-recorder dumps from every rank (TORCH_NCCL_TRACE_BUFFER_SIZE=2000, "
            "TORCH_NCCL_DUMP_ON_TIMEOUT=1)", [])


_DUMP_FROM = re.compile(r"collective timeout from rank (\d{1,7})")


def teardown_rows(ev: pd.DataFrame) -> pd.DataFrame:
    """One row per (artifact, rank) that tore its process group down, for a trace whose excerpt
    holds no watchdog timeout record: the first teardown line stands for the timeout (a bare
    checkTimeout stack only where no teardown line is seen)."""
    rows = ev[(ev["source"] == "log") & in_values(ev["name"], TEARDOWN_NAMES)]
    if rows.empty:
        return rows
    names = text_values(rows["name"])
    timed_out = {a for a, n in zip(text_values(rows["artifact"]), names) if n == "NCCLTimeoutBacktrace"}
    keep: list[tuple[int, str]] = []
    for stacks_only in (False, True):
        seen: set = set()
        for i, (name, artifact, attrs) in enumerate(zip(names, text_values(rows["artifact"]), rows["attrs"])):
            a = _attrs(attrs)
            text = str(a.get("text", ""))
            if (name in _FALLBACK_TEARDOWN) != stacks_only or (name == "NCCLDumpSignal" and "timeout" not in text):
                continue
            key = (artifact, _int(a.get("rank")))
            if key in seen:
                continue
            seen.add(key)
            m = _DUMP_FROM.search(text)
            a.update(signal="teardown", seq=None, op=None, timed_out=artifact in timed_out,
                     dump_from=int(m.group(1)) if m else None)
            keep.append((i, json.dumps(a)))
        if keep:
            break
    out = rows.iloc[[i for i, _ in keep]].copy()
    out["attrs"] = [a for _, a in keep]
    out["name"] = "NCCLProcessGroupTornDown"
    return out


_CROSS_RANK_CAUSE = {"peer_missing": "peer_missing", "collective_mismatch": "collective_mismatch",
                     "not_started": "stream_blocked"}


def _cross_rank_verdict(t: dict, seq: int | None, divergences: Sequence[Divergence]):
    for d in divergences:
        same_pg = _same_pg(t, d)
        if same_pg and (seq is None or d.seq <= seq):
            return _CROSS_RANK_CAUSE[d.cause], d.reason, "", d.culprit_ranks
    return None


def _same_pg(t: dict, d: Divergence) -> bool:
    """The log names a group by id and/or name ("default_pg"); the dumps by name and description."""
    names = {str(t[k]) for k in ("pg", "pg_name") if t.get(k) not in (None, "")}
    pg_id = _int(t.get("pg_id"))
    if not names and pg_id is None:
        return True  # the log does not say which group
    return bool(names & {d.pg, d.entry.pg_desc}) or (pg_id is not None and pg_id == d.entry.pg_id)


# --- ranks whose watchdog lines disagree -----------------------------------------------------
def watchdog_mismatches(timeouts: list[dict]) -> dict[int, tuple[str, list[int]]]:
    """Row index -> (reason, culprit ranks) for timeouts whose ranks report one sequence id of
    one group with different ops or sizes (only what the watchdog lines print is compared)."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, t in enumerate(timeouts):
        if t.get("seq") is not None and t.get("op") and not t.get("restated") and t.get("rank") is not None \
                and _complete(t):
            groups[(t["seq"], t.get("timeout_ms"))].append(i)
    out: dict[int, tuple[str, list[int]]] = {}
    for (seq, _timeout), rows in groups.items():
        by_rank: dict[int, int] = {}  # rank: its first row
        for i in rows:
            by_rank.setdefault(timeouts[i]["rank"], i)
        if len(by_rank) < 2 or len({p for p in (_pg_key(timeouts[i]) for i in by_rank.values()) if p}) > 1:
            continue
        found = _disagreement({r: timeouts[i] for r, i in by_rank.items()}, seq)
        if not found:
            continue
        pgs = {_pg_key(timeouts[i]) for i in rows} - {""}
        for i, t in enumerate(timeouts):
            if t.get("seq") == seq and (not pgs or _pg_key(t) in pgs | {""}):
                out[i] = found  # the same collective's other reports (failure lines carry no op)
    return out


def _complete(t: dict) -> bool:
    """A watchdog record read in full: a terminal or logger wrap can cut one mid-field
    (`OpType=_ALLGATHER_BA` ...), and a cut record differs from every whole one."""
    return t.get("numel_in") is not None and t.get("numel_out") is not None and t.get("timeout_ms") is not None


def _pg_key(t: dict) -> str:
    return str(t.get("pg_guid") if t.get("pg_guid") is not None else (t.get("pg") or t.get("pg_id") or ""))


def _disagreement(by_rank: dict[int, dict], seq) -> tuple[str, list[int]] | None:
    if any(str(t.get("op")).upper() in P2P_OPS for t in by_rank.values()):
        return None
    checks = [("op type", lambda t: t.get("op"))]
    if not any(str(t.get("op")).upper() in SIZE_FREE_OPS for t in by_rank.values()):
        checks += [("input size", lambda t: t.get("numel_in")), ("output size", lambda t: t.get("numel_out"))]
    for what, key in checks:
        values = {r: str(key(t)) for r, t in by_rank.items() if key(t) is not None}
        ranks_by_value: dict[str, list[int]] = defaultdict(list)
        for r, v in sorted(values.items()):
            ranks_by_value[v].append(r)
        if len(ranks_by_value) < 2:
            continue
        top = max(len(rs) for rs in ranks_by_value.values())
        majority = [v for v, rs in ranks_by_value.items() if len(rs) == top]
        # the most common value is the expected one; on a tie every side is named
        culprits = sorted(r for v, rs in ranks_by_value.items() if len(majority) > 1 or v != majority[0] for r in rs)
        parts = "; ".join(f"rank(s) {rs} ran {_describe(by_rank[rs[0]])}" for rs in ranks_by_value.values())
        return (f"The ranks' watchdog lines disagree on seq {seq}: {parts} ({what} differs), so the collective "
                "could never complete: each side waits inside a different collective", culprits)
    return None


def _describe(t: dict) -> str:
    return f"{t.get('op')} NumelIn={t.get('numel_in')} NumelOut={t.get('numel_out')}"


def _mismatch_report(ev: pd.DataFrame) -> tuple[str, list[int]] | None:
    rows = ev[(ev["kind"] == "error") & in_values(ev["name"], MISMATCH_REPORTS)]
    if rows.empty:
        return None
    a = _attrs(rows["attrs"].iloc[0])
    return (f"{rows['name'].iloc[0]} at {rows['artifact'].iloc[0]} {rows['loc'].iloc[0]} reports that the ranks "
            "called different collectives", list(a.get("culprit_ranks") or []))


def _coll_mismatch_report(ctx) -> tuple[str, list[int]] | None:
    """Ranks whose COLL lines name different collectives at one opCount (collectives.py)."""
    found = ctx.feature("nccl_coll_mismatch")
    if found.empty:
        return None
    a = _attrs(found["attrs"].iloc[0])
    return (f"NCCL's COLL lines disagree at opCount {a.get('opcount_hex')} ({a.get('differs')}): {a.get('detail')}",
            [])


# --- a rank that failed before the collective timed out ----------------------------------------
def failures(ev: pd.DataFrame) -> list[dict]:
    """Process-ending failures in the logs: OOM, CUDA errors, Xid, exceptions, kills (not NCCL's
    own reactions to a hang, which come after it)."""
    ends = in_values(ev["name"], ["ProcessExit", "NCCLProcessGroupDestroyed"])
    rows = ev[((ev["kind"] == "oom") | (ev["kind"] == "error") | ends) & (ev["source"] == "log")]
    out = []
    for ts, kind, name, attrs, artifact, loc in zip(rows["ts"], rows["kind"], text_values(rows["name"]),
                                                    rows["attrs"], text_values(rows["artifact"]), rows["loc"]):
        a = _attrs(attrs)
        key = _failure_key(kind, name, a)
        if key:
            out.append({"ts": int(ts), "name": name, "key": key, "rank": _int(a.get("rank")),
                        "artifact": artifact, "loc": str(loc), "line": _line_no(loc),
                        "text": str(a.get("message") or a.get("text") or name)[:200]})
    return out


def _failure_key(kind: str, name: str, a: dict) -> str:
    if kind == "oom":
        return "cuda_oom"
    if name == "NCCLProcessGroupDestroyed":
        return "left" if a.get("rank") is not None else ""
    if name == "ProcessExit":
        code = _int(a.get("exit_code", a.get("return_code")))
        return "killed" if code in _KILL_CODES else ""
    if name.startswith("cudaError") or name == "CudaErrorInWatchdog":
        return "cuda.kernel_fault" if name in KERNEL_FAULTS else "cuda_error"
    if name == "Xid":
        return "gpu.xid"
    if name in ("NCCLNetworkError", "NCCLRemoteError"):
        return "nccl.network_error"
    if name.startswith(("NCCL", "FR", "Collective", "NCCLRas")) or name in ("Terminate", "Traceback") \
            or a.get("repeat_of") or not a.get("exception"):
        return ""
    message = f"{a.get('exception', '')}: {a.get('exception_message', a.get('message', ''))}"
    return "" if _CONSEQUENCES.search(message[:2000]) else "exception"


def _line_no(loc) -> int | None:
    m = re.match(r"line (\d+)", str(loc))
    return int(m.group(1)) if m else None


def first_failure(t: dict, ts: int, artifact: str, loc: str, found: list[dict]) -> dict | None:
    """The earliest failure that could have left this timeout's collective waiting. Within one
    file the earlier line wins over the earlier time: lines without a stamp inherit the last
    one, so a traceback can read later than the teardown lines it caused."""
    first = _first_failure(t, ts, artifact, loc, found)
    if first is None:
        return None
    same_file = [f for f in found if f["artifact"] == first["artifact"] and f["line"] is not None
                 and first["line"] is not None and f["line"] < first["line"] and f["rank"] == first["rank"]]
    earlier = _first_failure(t, ts, artifact, loc, sorted(same_file, key=lambda f: f["line"]), by_line=True)
    return earlier or first


def _first_failure(t: dict, ts: int, artifact: str, loc: str, found: list[dict], by_line: bool = False) -> dict | None:
    rank, line = _int(t.get("rank")), _line_no(loc)
    began = ts - int(t.get("elapsed_ms") or t.get("timeout_ms") or 0) * 10**6
    for f in (found if by_line else sorted(found, key=lambda f: (f["ts"], f["line"] or 0))):
        own = (rank is not None and f["rank"] == rank) or (
            f["rank"] is None and f["artifact"] == artifact and f["key"] == "cuda.kernel_fault")
        if own and f["key"] not in ("cuda.kernel_fault", "nccl.network_error"):
            continue  # only a broken CUDA context or transport makes this rank's own watchdog fail
        if f["rank"] is None and f["key"] == "exception" and (rank is None or f["artifact"] == artifact):
            continue  # an exception of unknown rank next to the timeout may be this process's own, caught
        slack = OWN_FAULT_SLACK_NS if (own or f["rank"] is None) and f["key"] in ("cuda.kernel_fault",
                                                                                 "cuda_oom") else 0
        if f["artifact"] == artifact and f["line"] is not None and line is not None:
            before = f["line"] < line or (slack and f["ts"] - ts <= slack)
        else:
            before = not (f["ts"] and ts) or f["ts"] <= ts + slack
        if before and (not (f["ts"] and ts) or f["ts"] >= began - FAILURE_WINDOW_NS):
            return {**f, "own": own}
    return None


def who_of(t: dict) -> str:
    return f"rank {t['rank']}'s" if t.get("rank") is not None else "the"


def _failure_verdict(t: dict, f: dict) -> tuple[str, str, str, list[int]]:
    who = f"rank {f['rank']}" if f["rank"] is not None else "a process"
    if f["key"] == "nccl.network_error":
        return ("transport_failed",
                f"NCCL's transport failed at {f['artifact']} {f['loc']} ({f['text'][:120]}) before {who_of(t)} seq "
                f"{t.get('seq')} timed out: the collective could not move data, so the timeout follows the "
                "transport failure", "", [f["rank"]] if f["rank"] is not None else [])
    what = {"cuda_oom": "ran out of GPU memory", "cuda.kernel_fault": f"hit a CUDA fault ({f['name']})",
            "cuda_error": f"hit a CUDA error ({f['name']})", "gpu.xid": "lost its GPU (Xid)",
            "killed": "was killed", "exception": f"raised {f['name']}",
            "left": "had already shut its process group down (it will join no further collective)",
            "stuck": f"was still waiting in an earlier collective, seq {f.get('stuck_at')} (its own watchdog timed "
                     "out there)"}[f["key"]]
    where = f"{f['artifact']} {f['loc']}"
    if f["own"]:
        return ("own_failure",
                f"this rank {what} at {where} before its watchdog reported seq {t.get('seq')}: the NCCL failure is "
                "that fault surfacing through the watchdog, not a communication problem", "", [f["rank"]])
    so = ("it never reached this collective, so this timeout follows that one" if f["key"] == "stuck" else
          "the collective waited for a rank that was already gone, so the timeout is a consequence of that failure")
    return ("peer_failed", f"{who} {what} at {where} before rank {t.get('rank')}'s seq {t.get('seq')} timed out: {so}",
            "", [f["rank"]] if f["rank"] is not None else [])


@feature("nccl_timeouts", doc="One row per NCCL watchdog timeout/failure with its verdict: attrs.cause is "
         "stream_blocked | peer_missing | collective_mismatch | peer_failed | own_failure | transport_failed | "
         "undetermined, "
         "attrs.reason says why, attrs.culprit_ranks (and attrs.culprit, as text) the rank(s) to blame, "
         "attrs.next_capture what would decide it, attrs.caused_by (artifact|loc) the failure a peer_failed or "
         "own_failure timeout follows, attrs.mismatch_source (watchdog_lines, report, flight_recorder, peer_progress) "
         "for a mismatch; attrs.went_on (rank -> where its log goes on) when other ranks' logs show them past it; "
         "attrs.seq, op, pg, rank, timeout_ms, elapsed_ms from the log; attrs.signal is heartbeat for a hung watchdog, "
         "teardown for a rank's process-group teardown lines read where the trace holds no timeout record.")
def nccl_timeouts(ctx) -> pd.DataFrame:
    parts = [_timeouts_of(ev, ctx) for ev in per_job(ctx.events)]  # one job's ranks with each other only
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0] if parts else pd.DataFrame()


def _timeouts_of(ev: pd.DataFrame, ctx) -> pd.DataFrame:
    timeouts = ev[(ev["kind"] == "error") & in_values(ev["name"], TIMEOUT_NAMES)]
    if timeouts.empty:
        timeouts = teardown_rows(ev)
    if timeouts.empty:
        return timeouts
    entries, status = _fr_state(ev)
    divergences = first_divergences(*fr_entries(ev))
    found = sorted(failures(ev), key=lambda f: f["ts"])[:MAX_FAILURES]
    counters = rank_counters(ev)
    logs = rank_logs(ev, found)
    parsed = [_attrs(a) for a in timeouts["attrs"]]
    _add_own_timeouts(counters, parsed, text_values(timeouts["artifact"]), timeouts["loc"])
    mismatches = watchdog_mismatches(parsed)
    report = _mismatch_report(ev) or _coll_mismatch_report(ctx)
    rows = []
    for i, (_, row) in enumerate(timeouts.iterrows()):
        a = parsed[i]
        failure = first_failure(a, int(row["ts"]), str(row["artifact"]), str(row["loc"]), found) \
            or _stuck_peer(a, counters)
        cause, reason, capture, culprits = verdict(a, entries, status, divergences, mismatches.get(i) or report,
                                                   failure, counters)
        extra: dict[str, object] = {}
        if cause == "undetermined" and (went := _ranks_went_on(a, int(row["ts"]), logs)):
            cause, reason, capture, culprits = went
            extra["went_on"] = {str(r): logs[r]["where"] for r in culprits}
        if cause in ("peer_failed", "own_failure", "transport_failed") and failure:
            extra = {"caused_by": f"{failure['artifact']}|{failure['loc']}", "failure": failure["name"],
                     "failure_key": failure["key"], "failure_loc": f"{failure['artifact']} {failure['loc']}"}
        if cause == "collective_mismatch":
            extra["mismatch_source"] = ("watchdog_lines" if i in mismatches else "report" if report
                                        else "flight_recorder" if _cross_rank_verdict(a, _int(a.get("seq")), divergences)
                                        else "peer_progress")
        out = row.to_dict()
        out["attrs"] = json.dumps({**a, "cause": cause, "reason": reason, "next_capture": capture,
                                   "culprit_ranks": culprits, "culprit": ", ".join(map(str, culprits)), **extra})
        rows.append(out)
    return pd.DataFrame(rows)


# --- NCCL RAS status reports -------------------------------------------------------------------
RAS_NAMES = ("NCCLRasCommunicator", "NCCLRasMissingRanks", "NCCLRasDeadProcesses", "NCCLRasOpCountMismatch",
             "NCCLRasAsyncError", "NCCLRasOpCount", "NCCLRasRank", "NCCLRasMissingRankList", "NCCLRasProcess")


@feature("nccl_ras", doc="NCCL RAS (`ncclras`, NCCL 2.24+) status reports, one row per problem a report names: "
         "attrs.cause is missing (ranks or processes RAS could not reach), dead (processes declared dead) or "
         "behind (ranks launched fewer operations of one type than the others); attrs.ranks / processes the "
         "ranks and processes listed, attrs.counts the operation-count groups ([ranks, launched up to]), "
         "attrs.behind_ranks / ahead_count for `behind`, attrs.stuck when two snapshots of one communicator show "
         "the same counts, attrs.comm (the communicator hash), attrs.reason.")
def nccl_ras(ctx) -> pd.DataFrame:
    ev = ctx.events
    rows = ev[(ev["source"] == "log") & in_values(ev["name"], RAS_NAMES)]
    problems: list[dict] = []
    comm = ""
    for _, row in rows.iterrows():
        name, a = str(row["name"]), _attrs(row["attrs"])
        if name == "NCCLRasCommunicator":
            comm = str(a.get("hash", ""))
        elif name in ("NCCLRasMissingRanks", "NCCLRasDeadProcesses", "NCCLRasOpCountMismatch"):
            cause = {"NCCLRasMissingRanks": "missing", "NCCLRasDeadProcesses": "dead"}.get(name, "behind")
            problems.append({"row": row.to_dict(), "cause": cause, "comm": comm, "count": _int(a.get("count")) or 1,
                             "unit": a.get("unit", "process" if cause == "dead" else "rank"), "op": a.get("op") or "",
                             "ranks": [], "counts": [],
                             "processes": [f"{a['pid']} on {a.get('node')}"] if a.get("pid") else []})
        elif problems:
            _ras_detail(problems[-1], name, a)
    return pd.DataFrame([_ras_row(p, problems) for p in problems])


def _ras_detail(p: dict, name: str, a: dict) -> None:
    """Attach a listed rank, process or count group to the problem it is printed under."""
    if name == "NCCLRasOpCount":
        p["counts"].append([_int(a.get("count")), _int(a.get("operation"))])
    elif name == "NCCLRasRank":
        p["ranks"].append(_int(a.get("rank")))
        if p["counts"]:
            p.setdefault("listed_under", p["counts"][-1][1])
    elif name == "NCCLRasMissingRankList":
        p["ranks"].extend(a.get("ranks") or [])
    elif name == "NCCLRasProcess":
        p["processes"].append(f"{a.get('pid')} on {a.get('node')}")


def _ras_row(p: dict, problems: list[dict]) -> dict:
    row = p["row"]
    a = _attrs(row["attrs"])
    ranks = sorted({r for r in p["ranks"] if r is not None})
    extra: dict = {}
    if p["cause"] == "behind":
        ops = sorted({c[1] for c in p["counts"] if c[1] is not None})
        low, high = (ops[0], ops[-1]) if ops else (None, None)
        behind = [c for c in p["counts"] if c[1] == low]
        listed_low = p.get("listed_under") == low
        same = [q for q in problems if q is not p and q["cause"] == "behind" and q["comm"] == p["comm"]
                and q["counts"] == p["counts"] and q["op"] == p["op"]]
        extra = {"behind_ranks": ranks if listed_low else [], "behind_count": sum(c[0] or 0 for c in behind),
                 "ahead_count": sum((c[0] or 0) for c in p["counts"] if c[1] == high), "behind_at": low,
                 "ahead_at": high, "stuck": bool(same)}
        who = f"rank(s) {', '.join(map(str, ranks))}" if listed_low and ranks else f"{extra['behind_count']} rank(s)"
        reason = (f"{who} of communicator {p['comm'] or '?'} launched {p['op'] or 'collective'} operations only up "
                  f"to {low}, while {extra['ahead_count']} rank(s) reached {high}"
                  + (f" (listed: rank(s) {', '.join(map(str, ranks))})" if ranks and not listed_low else "")
                  + ("; two snapshots show the same counts, so the ranks are stuck, not just late" if same else
                     "; one snapshot cannot tell a hang from ranks that are merely late: repeat the query"))
    else:
        what = "could not be reached (unresponsive)" if p["cause"] == "missing" else "is considered dead"
        listed = (f"rank(s) {', '.join(map(str, ranks))}" if ranks else
                  f"process(es) {', '.join(p['processes'])}" if p["processes"] else "")
        reason = (f"{p['count']} {p['unit']}(s) of communicator {p['comm'] or '(job)'} {what}"
                  + (f": {listed}" if listed else ""))
    attrs = {**a, "cause": p["cause"], "comm": p["comm"], "op": p["op"], "ranks": ranks,
             "ranks_text": ", ".join(map(str, ranks)) or "not listed", "processes": p["processes"],
             "counts": p["counts"], "reason": reason, **extra}
    attrs.setdefault("text", reason)  # evidence for a JSON report, whose rows have no line
    return {**row, "kind": "marker", "name": f"nccl_ras_{p['cause']}", "attrs": json.dumps(attrs)}
