"""NCCL watchdog timeouts, decided with the flight recorder when it is in the trace.

A timed-out collective either never started on this rank (its stream was still busy with
earlier work: `stream_blocked`) or started and waited for a peer that never joined
(`peer_missing`). Only the flight recorder (or several ranks' dumps) tells the two apart;
a log alone leaves the verdict `undetermined`, and the finding says what to capture next.
With several ranks' dumps the cross-rank alignment (rules/features/collectives.py) names the
culprit rank; when ranks disagreed on the collective the cause is `collective_mismatch`, which
the nccl.collective-mismatch rule reports (the timeout is its consequence, not a second finding).
"""
from __future__ import annotations

import json

import pandas as pd

from rules.features import feature, parse_attrs as _attrs
from rules.features.collectives import Divergence, first_divergences, fr_entries, to_int as _int

TIMEOUT_NAMES = ("NCCLWatchdogTimeout", "NCCLWatchdogFailure", "NCCLBlockingWaitTimeout")


def _fr_state(ev: pd.DataFrame) -> tuple[dict, dict]:
    """(entries by (rank, pg, seq) -> attrs, pg_status by (rank, pg) -> attrs) from dumps."""
    fr = ev[ev["source"] == "flight_recorder"]
    entries, status = {}, {}
    for kind, name, attrs in zip(fr["kind"], fr["name"].astype(str), fr["attrs"]):
        a = _attrs(attrs)
        rank, pg = _int(a.get("rank")), str(a.get("pg_id", a.get("pg_name", "0")))
        if kind == "collective":
            entries[(rank, pg, _int(a.get("collective_seq_id")))] = a
        elif name == "pg_status":
            status[(rank, pg)] = a
    return entries, status


def verdict(t: dict, entries: dict, status: dict,
            divergences: list[Divergence] = ()) -> tuple[str, str, str, list[int]]:
    """(cause, reason, next capture, culprit ranks) for one timeout.

    With several ranks' dumps, the first cross-rank divergence at or before the timed-out
    sequence id decides (a rank that never enqueued it, ranks that disagree on it, ranks where
    it never started); else this rank's own dump, else nothing."""
    rank, seq = _int(t.get("rank")), _int(t.get("seq"))
    pg = str(t.get("pg", t.get("pg_id", "0")))
    cross = _cross_rank_verdict(t, seq, divergences)
    if cross:
        return cross
    entry = entries.get((rank, pg, seq)) or next(
        (a for (r, _p, s), a in entries.items() if s == seq and (rank is None or r == rank or r is None)), None)
    st = status.get((rank, pg)) or next(iter(status.values()), {})
    last_started = _int(st.get("last_started_collective"))
    last_completed = _int(st.get("last_completed_collective"))
    if entry is not None or st:
        state = (entry or {}).get("state")
        # the entry's own state wins: pg_status can lag behind it by a watchdog pass
        never_started = state == "scheduled" or (
            state not in ("started", "completed") and last_started is not None and seq is not None and last_started < seq)
        if never_started:
            return ("stream_blocked",
                    f"the flight recorder shows seq {seq} was enqueued but never started on rank {rank} "
                    f"(state {state or 'not started'}, last started {last_started}, last completed {last_completed}): "
                    "earlier work on this rank's stream never finished, so no peer was waited on",
                    "", [rank] if rank is not None else [])
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
    return ("undetermined",
            "the log shows the timeout but not whether the collective started on this rank or which peer was absent",
            "flight-recorder dumps from every rank (TORCH_NCCL_TRACE_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1, "
            "TORCH_FR_DUMP_TEMP_FILE=/tmp/nccl_trace_rank_)", [])


_CROSS_RANK_CAUSE = {"peer_missing": "peer_missing", "collective_mismatch": "collective_mismatch",
                     "not_started": "stream_blocked"}


def _cross_rank_verdict(t: dict, seq: int | None, divergences: list[Divergence]):
    for d in divergences:
        same_pg = _same_pg(t, d)
        if same_pg and (seq is None or d.seq <= seq):
            return _CROSS_RANK_CAUSE[d.cause], d.reason, "", d.culprit_ranks
    return None


def _same_pg(t: dict, d: Divergence) -> bool:
    """The log names a group by id and/or name ("default_pg"); the dumps by name and description."""
    names = {str(t[k]) for k in ("pg", "pg_name") if t.get(k) is not None}
    pg_id = _int(t.get("pg_id"))
    if not names and pg_id is None:
        return True  # the log does not say which group
    return bool(names & {d.pg, d.entry.pg_desc}) or (pg_id is not None and pg_id == d.entry.pg_id)


@feature("nccl_timeouts", doc="One row per NCCL watchdog timeout/failure with its verdict: attrs.cause is "
         "stream_blocked | peer_missing | collective_mismatch | undetermined, attrs.reason says why, "
         "attrs.culprit_ranks (and attrs.culprit, as text) the rank(s) to blame when the dumps show them, "
         "attrs.next_capture what would decide it; attrs.seq, op, pg, rank, timeout_ms, elapsed_ms from the log.")
def nccl_timeouts(ctx) -> pd.DataFrame:
    ev = ctx.events
    timeouts = ev[(ev["kind"] == "error") & ev["name"].isin(TIMEOUT_NAMES)]
    if timeouts.empty:
        return timeouts
    entries, status = _fr_state(ev)
    divergences = first_divergences(*fr_entries(ev))
    rows = []
    for _, row in timeouts.iterrows():
        a = _attrs(row["attrs"])
        cause, reason, capture, culprits = verdict(a, entries, status, divergences)
        out = row.to_dict()
        out["attrs"] = json.dumps({**a, "cause": cause, "reason": reason, "next_capture": capture,
                                   "culprit_ranks": culprits, "culprit": ", ".join(map(str, culprits))})
        rows.append(out)
    return pd.DataFrame(rows)
