"""NCCL watchdog timeouts, decided with the flight recorder when it is in the trace.

A timed-out collective either never started on this rank (its stream was still busy with
earlier work: `stream_blocked`) or started and waited for a peer that never joined
(`peer_missing`). Only the flight recorder (or several ranks' dumps) tells the two apart;
a log alone leaves the verdict `undetermined`, and the finding says what to capture next.
"""
from __future__ import annotations

import json

import orjson
import pandas as pd

from rules.features import feature

TIMEOUT_NAMES = ("NCCLWatchdogTimeout", "NCCLWatchdogFailure", "NCCLBlockingWaitTimeout")


def _attrs(s: str) -> dict:
    try:
        v = orjson.loads(s)
        return v if isinstance(v, dict) else {}
    except orjson.JSONDecodeError:
        return {}


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


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


def verdict(t: dict, entries: dict, status: dict) -> tuple[str, str, str]:
    """(cause, reason, next capture) for one timeout."""
    rank, seq = _int(t.get("rank")), _int(t.get("seq"))
    pg = str(t.get("pg", t.get("pg_id", "0")))
    ranks_with_dumps = {r for (r, _p) in status} | {r for (r, _p, _s) in entries}
    entry = entries.get((rank, pg, seq)) or next(
        (a for (r, _p, s), a in entries.items() if s == seq and (rank is None or r == rank or r is None)), None)
    st = status.get((rank, pg)) or next(iter(status.values()), {})
    last_started = _int(st.get("last_started_collective"))
    last_completed = _int(st.get("last_completed_collective"))
    if entry is not None or st:
        state = (entry or {}).get("state")
        never_started = state == "scheduled" or (last_started is not None and seq is not None and last_started < seq)
        if never_started:
            return ("stream_blocked",
                    f"the flight recorder shows seq {seq} was enqueued but never started on rank {rank} "
                    f"(state {state or 'not started'}, last started {last_started}, last completed {last_completed}): "
                    "earlier work on this rank's stream never finished, so no peer was waited on",
                    "")
        if len(ranks_with_dumps) > 1 and seq is not None:
            missing = sorted(r for r in ranks_with_dumps
                             if r is not None and not any(s == seq and rr == r for (rr, _p, s) in entries))
            if missing:
                return ("peer_missing", f"seq {seq} started but rank(s) {missing} never enqueued it", "")
        return ("undetermined",
                f"seq {seq} started on rank {rank} but only this rank's dump is here: a missing peer and a "
                "stalled collective look the same from one rank",
                "flight-recorder dumps from every rank of the process group")
    return ("undetermined",
            "the log shows the timeout but not whether the collective started on this rank or which peer was absent",
            "flight-recorder dumps from every rank (TORCH_NCCL_TRACE_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1, "
            "TORCH_FR_DUMP_TEMP_FILE=/tmp/nccl_trace_rank_)")


@feature("nccl_timeouts", doc="One row per NCCL watchdog timeout/failure with its verdict: attrs.cause is "
         "stream_blocked | peer_missing | undetermined, attrs.reason says why, attrs.next_capture what "
         "would decide it; attrs.seq, op, pg, rank, timeout_ms, elapsed_ms from the log.")
def nccl_timeouts(ctx) -> pd.DataFrame:
    ev = ctx.events
    timeouts = ev[(ev["kind"] == "error") & ev["name"].isin(TIMEOUT_NAMES)]
    if timeouts.empty:
        return timeouts
    entries, status = _fr_state(ev)
    rows = []
    for _, row in timeouts.iterrows():
        a = _attrs(row["attrs"])
        cause, reason, capture = verdict(a, entries, status)
        out = row.to_dict()
        out["attrs"] = json.dumps({**a, "cause": cause, "reason": reason, "next_capture": capture})
        rows.append(out)
    return pd.DataFrame(rows)
