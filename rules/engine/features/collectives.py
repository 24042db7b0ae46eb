"""Cross-rank analysis of NCCL flight-recorder dumps: who diverged first, and who arrived last.

Every rank's dump lists the collectives it enqueued, numbered per process group by
`collective_seq_id`. Aligning the ranks' entries on (process group, sequence id) answers what
one rank's dump cannot (the same alignment as PyTorch's `fr_trace` analyzer):

- peer missing: a rank whose last enqueued collective is below a sequence id the others
  enqueued never reached that collective (the rank named is the culprit);
- collective mismatch: ranks disagree on the op, sizes or dtypes of one sequence id;
- not started: every rank enqueued it, but it never started on some ranks while it started
  (or finished) on others: those ranks' streams were busy with earlier work. Only when the job
  recorded start events (TORCH_NCCL_ENABLE_TIMING): without them every unfinished entry stays
  `scheduled`, started or not;
- straggler: the rank whose entry was created last held the others waiting, by the gap
  between its creation time and the earliest rank's (c10::getTime, the wall clock: ranks on
  different hosts are only as comparable as their clocks).

Entries older than a rank's ring buffer are not evidence: a rank is "missing" a sequence id
only when the id is above the last one it enqueued. Point-to-point entries (send/recv) are
numbered separately and are left out. Only ranks whose dumps are in the trace are judged.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from ingest.engine.trace_frame import in_values, parse_attrs, text_values
from rules.engine.features import feature
from rules.engine.features.jobs import per_job

STATE_ORDER = {"scheduled": 0, "started": 1, "completed": 2}
SIZE_FREE_OPS = ("all_to_all", "alltoall", "gather", "scatter")  # sizes may differ by design (uneven splits, root)


def to_int(v) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class FrEntry:
    """One collective of one rank's flight-recorder dump."""
    rank: int
    pg: str                      # the process group's name: the same on every rank
    seq: int
    op: str                      # profiling_name, e.g. nccl:all_reduce
    input_sizes: str = "[]"      # JSON text, compared as is
    output_sizes: str = "[]"
    dtypes: str = "[]"           # input dtypes
    state: str = ""
    created_ns: int = 0
    duration_ms: float | None = None
    timed: bool = False          # the entry carries start information (TORCH_NCCL_ENABLE_TIMING)
    pg_id: int | None = None
    pg_desc: str = ""
    artifact: str = ""
    loc: str = ""

    @property
    def has_start_info(self) -> bool:
        return self.timed or self.state == "started" or self.duration_ms is not None


@dataclass
class Divergence:
    """The first sequence id of a process group where the ranks stop agreeing."""
    pg: str
    seq: int
    cause: str                   # peer_missing | collective_mismatch | not_started
    culprit_ranks: list[int]
    reason: str
    entry: FrEntry               # a reference rank's entry: op, sizes, time, evidence
    ranks: list[int] = field(default_factory=list)
    differs: str = ""            # for a mismatch: op, input sizes, output sizes or dtypes


def fr_entries(events: pd.DataFrame) -> tuple[list[FrEntry], dict[tuple[int, str], int]]:
    """(collective entries, last enqueued seq by (rank, pg)) from the flight-recorder rows."""
    fr = events[events["source"] == "flight_recorder"]
    entries, last_enqueued = [], {}
    for kind, name, attrs, ts, artifact, loc in zip(fr["kind"], text_values(fr["name"]), fr["attrs"], fr["ts"],
                                                   text_values(fr["artifact"]), fr["loc"]):
        a = parse_attrs(attrs)
        rank = to_int(a.get("rank"))
        if rank is None:
            continue  # a dump whose rank is unknown cannot be aligned
        pg = str(a.get("pg_name") or a.get("pg_id") or "0")
        if kind == "collective":
            seq = to_int(a.get("collective_seq_id"))
            if seq is None or a.get("is_p2p"):
                continue
            entries.append(FrEntry(
                rank=rank, pg=pg, seq=seq, op=name,
                input_sizes=_canon(a.get("input_sizes")), output_sizes=_canon(a.get("output_sizes")),
                dtypes=_canon(a.get("input_dtypes")), state=str(a.get("state") or ""), created_ns=int(ts),
                duration_ms=_float(a.get("duration_ms")), timed=_timed(a), pg_id=to_int(a.get("pg_id")),
                pg_desc=str(a.get("pg_desc") or ""), artifact=artifact, loc=str(loc)))
        elif name == "pg_status":
            enq = to_int(a.get("last_enqueued_collective"))
            if enq is not None:
                last_enqueued[(rank, pg)] = enq
    return entries, last_enqueued


def _timed(a: dict) -> bool:
    return a.get("state") == "started" or bool(a.get("time_discovered_started_ns")) or \
        _float(a.get("duration_ms")) is not None


def timing_enabled(entries: list[dict], pg_status: Sequence[dict] = ()) -> bool:
    """Did the job record start events? Without TORCH_NCCL_ENABLE_TIMING no entry is ever
    `started` and pg_status's last started collective stays -1, so `scheduled` only means
    "not finished". One setting for the whole job: any rank's evidence counts."""
    started = [to_int(s.get("last_started_collective")) for s in pg_status]
    return any(_timed(a) for a in entries) or any(v is not None and v >= 0 for v in started)


def align(entries: list[FrEntry]) -> dict[str, dict[int, dict[int, FrEntry]]]:
    """{pg: {seq: {rank: entry}}}."""
    out: dict[str, dict[int, dict[int, FrEntry]]] = defaultdict(lambda: defaultdict(dict))
    for e in entries:
        out[e.pg][e.seq][e.rank] = e
    return out


def first_divergences(entries: list[FrEntry], last_enqueued: dict[tuple[int, str], int]) -> list[Divergence]:
    """Per process group seen on two ranks or more, the first sequence id where they diverge."""
    out = []
    for pg, by_seq in align(entries).items():
        ranks = sorted({r for s in by_seq.values() for r in s} | {r for (r, p) in last_enqueued if p == pg})
        if len(ranks) < 2:
            continue
        last = {r: max([last_enqueued.get((r, pg), -1)] + [s for s, es in by_seq.items() if r in es]) for r in ranks}
        timed = any(e.has_start_info for es in by_seq.values() for e in es.values())
        for seq in sorted(by_seq):
            d = _divergence(pg, seq, by_seq[seq], ranks, last, timed)
            if d:
                out.append(d)
                break
    return sorted(out, key=lambda d: d.entry.created_ns)


def _divergence(pg: str, seq: int, present: dict[int, FrEntry], ranks: list[int],
                last: dict[int, int], timed: bool = True) -> Divergence | None:
    ref = present[min(present)]
    missing = [r for r in ranks if r not in present and last[r] < seq]
    if missing:
        return Divergence(pg, seq, "peer_missing", missing, (
            f"{ref.op} seq {seq} of process group {_pg_label(ref)} was enqueued by rank(s) {sorted(present)} "
            f"but never by rank(s) {missing} (their last enqueued collective is "
            f"{', '.join(f'{last[r]} on rank {r}' for r in missing)})"), ref, ranks)
    mismatch = _mismatch(present)
    if mismatch:
        culprits, what, reason = mismatch
        return Divergence(pg, seq, "collective_mismatch", culprits, reason, present[culprits[0]], ranks,
                          differs=what)
    states = {r: STATE_ORDER.get(e.state, -1) for r, e in present.items()}
    # without start events `scheduled` only means "not finished": it proves nothing about the stream
    if timed and min(states.values()) == 0 and max(states.values()) >= 1:
        stuck = sorted(r for r, s in states.items() if s == 0)
        ahead = sorted(r for r, s in states.items() if s >= 1)
        return Divergence(pg, seq, "not_started", stuck, (
            f"{ref.op} seq {seq} of process group {_pg_label(ref)} never started on rank(s) {stuck} "
            f"while rank(s) {ahead} started it: the stuck rank's stream was still busy with earlier work"),
            ref, ranks)
    return None


def _mismatch(present: dict[int, FrEntry]) -> tuple[list[int], str, str] | None:
    """(culprit ranks, what differs, reason): the expected value is the most common one, ties
    going to the lowest rank (as the fr_trace analyzer takes the first rank's)."""
    checks = [("op", lambda e: e.op)]
    if not any(k in present[min(present)].op for k in SIZE_FREE_OPS):
        checks += [("input sizes", lambda e: e.input_sizes), ("output sizes", lambda e: e.output_sizes)]
    checks.append(("dtypes", lambda e: e.dtypes))
    for what, key in checks:
        values = {r: key(e) for r, e in present.items()}
        counts = Counter(values.values())
        if len(counts) < 2:
            continue
        top = max(counts.values())
        expected = values[min(r for r, v in values.items() if counts[v] == top)]
        agree = sorted(r for r, v in values.items() if v == expected)
        culprits = sorted(r for r, v in values.items() if v != expected)
        found = "; ".join(f"{values[r]} on rank {r}" for r in culprits)
        return culprits, what, f"{what} {found}, where rank(s) {agree} passed {expected}"
    return None


@dataclass
class Straggle:
    pg: str
    seq: int
    late_rank: int
    lag_ms: float                # the late rank's creation time minus the first rank's
    grown_ms: float              # how much later than at the previous collective it came
    first_rank: int
    entry: FrEntry               # the late rank's entry
    first: FrEntry               # the first rank's entry
    collectives: int             # collectives compared in this process group


def worst_straggles(entries: list[FrEntry]) -> list[Straggle]:
    """Per process group, the collective where one rank fell furthest behind the others.

    A rank that is late once stays late for the collectives its peers already enqueued behind
    it (their hosts run ahead of their GPUs), so the straggle is where its lag *grew* most,
    not where the lag is largest. The group's first collective absorbs the ranks' start-up
    skew and is left out."""
    out = []
    for pg, by_seq in align(entries).items():
        ranks = {r for es in by_seq.values() for r in es}
        full = sorted(seq for seq, es in by_seq.items() if set(es) == ranks)
        if len(ranks) < 2 or not full:
            continue
        if full[0] <= 1 and full[0] == min(by_seq):
            full = full[1:]
        best = None
        prev: dict[int, int] = {}  # rank: how late it was at the previous sequence number
        for seq in full:
            es = by_seq[seq]
            t0 = min(e.created_ns for e in es.values())
            offset = {r: e.created_ns - t0 for r, e in es.items()}
            late = max(offset, key=lambda r: (offset[r], r))
            grown = offset[late] - prev.get(late, 0)
            if best is None or grown > best[0]:
                first = min(es.values(), key=lambda e: (e.created_ns, e.rank))
                best = (grown, Straggle(pg, seq, late, offset[late] / 1e6, grown / 1e6, first.rank, es[late],
                                        first, len(full)))
            prev = offset
        if best:
            out.append(best[1])
    return out


def waited_ms(s: Straggle, events: pd.DataFrame) -> tuple[float | None, str]:
    """(ms, where) the first rank's collective ran while waiting: its flight-recorder duration
    (TORCH_NCCL_ENABLE_TIMING), else its profiler's collective kernel running when the late rank
    arrived."""
    if s.first.duration_ms is not None:
        return s.first.duration_ms, "flight recorder"
    k = events[(events["kind"] == "collective") & (events["device"] >= 0)
               & (events["ts"] <= s.entry.created_ns) & (events["ts"] + events["dur"] >= s.entry.created_ns)]
    for dur, attrs, artifact in zip(k["dur"], k["attrs"], text_values(k["artifact"])):
        a = parse_attrs(attrs)
        if to_int(a.get("rank")) == s.first_rank and str(a.get("pg_name", s.pg)) == s.pg:
            return dur / 1e6, artifact
    return None, ""


@feature("collective_divergence", doc="Cross-rank flight-recorder alignment (one row per process group whose "
         "ranks diverge): the first sequence id where they stop agreeing. attrs.cause is peer_missing, "
         "collective_mismatch or not_started; attrs.culprit_ranks, reason, seq, op, pg, differs (for a "
         "mismatch: op, input sizes, output sizes or dtypes), ranks (the ranks whose dumps are here).")
def collective_divergence(ctx) -> pd.DataFrame:
    rows = [_row(d.entry, "collective_divergence", {
        "cause": d.cause, "culprit_ranks": d.culprit_ranks, "culprit": _ranks_text(d.culprit_ranks),
        "reason": d.reason, "seq": d.seq, "op": d.entry.op, "pg": d.pg, "pg_desc": d.entry.pg_desc,
        "pg_label": _pg_label(d.entry), "differs": d.differs, "ranks": d.ranks, "ranks_text": _ranks_text(d.ranks)})
        for ev in per_job(ctx.events) for d in first_divergences(*fr_entries(ev))]
    return pd.DataFrame(rows)


@feature("collective_stragglers", doc="Per process group with dumps from several ranks, the collective where "
         "one rank fell furthest behind (one row; the group's first collective, which absorbs start-up skew, "
         "is left out): value = lag in ms between the first and the late rank's entry; attrs.late_rank (the "
         "straggler), culprit_ranks, lag_ms, grown_ms (lag added at this collective), waited_ms (how long the "
         "first rank's collective ran: flight recorder with TORCH_NCCL_ENABLE_TIMING, else its profiler "
         "kernel), waited_from, first_rank, seq, op, pg, collectives.")
def collective_stragglers(ctx) -> pd.DataFrame:
    rows = []
    for ev in per_job(ctx.events):  # one job's ranks with each other only
        rows += _straggler_rows(ev)
    return pd.DataFrame(rows)


def _straggler_rows(ev: pd.DataFrame) -> list[dict]:
    rows = []
    for s in worst_straggles(fr_entries(ev)[0]):
        waited, where = waited_ms(s, ev)
        row = _row(s.entry, "collective_straggler", {
            "late_rank": s.late_rank, "culprit_ranks": [s.late_rank], "culprit": str(s.late_rank),
            "lag_ms": round(s.lag_ms, 3), "grown_ms": round(s.grown_ms, 3), "waited_ms": waited,
            "waited_from": where, "first_rank": s.first_rank, "seq": s.seq, "op": s.entry.op, "pg": s.pg,
            "pg_desc": s.entry.pg_desc, "collectives": s.collectives,
            "reason": (f"rank {s.late_rank} reached {s.entry.op} seq {s.seq} of process group {_pg_label(s.entry)} "
                       f"{s.lag_ms:,.0f} ms after rank {s.first_rank}"
                       + (f", whose collective ran {waited:,.0f} ms waiting for it ({where})" if waited else ""))})
        row["value"] = s.lag_ms
        rows.append(row)
    return rows


def _row(e: FrEntry, name: str, attrs: dict) -> dict:
    """A feature row whose evidence is the flight-recorder entry `e`."""
    text = (f"rank {e.rank}: {e.op} seq {e.seq} input sizes {e.input_sizes} dtypes {e.dtypes} "
            f"state {e.state or '?'}")
    return {"ts": e.created_ns, "kind": "marker", "name": name, "source": "flight_recorder",
            "artifact": e.artifact, "loc": e.loc, "attrs": json.dumps({**attrs, "rank": e.rank, "text": text})}


def _ranks_text(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in ranks)


def _pg_label(e: FrEntry) -> str:
    return f"{e.pg} ({e.pg_desc})" if e.pg_desc and e.pg_desc != e.pg else e.pg


def _canon(v) -> str:
    return json.dumps(v, separators=(",", ":")) if v is not None else "[]"


def _float(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None


# --- NCCL's per-call COLL lines (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL) ---------------------------
# Every rank logs "<Op>: opCount N ... count C datatype D op R root T comm 0x.. [nranks=K]"; opCount
# numbers the calls of one communicator, so the ranks' lines at one opCount must name the same
# collective. The lines carry no communicator id: a communicator is the Init line's commId when
# the log has it, else the ranks of one size (only where that is unambiguous: one communicator of
# that size per process and GPU, no more members than ranks).
_COLL_P2P = ("Send", "Recv")
_ROOTED = ("Broadcast", "Reduce")
_REDUCING = ("AllReduce", "Reduce", "ReduceScatter")


@dataclass
class _Call:
    member: tuple
    op: str
    count: int | None
    dtype: str
    root: int | None
    redop: int | None
    a: dict           # the line's attrs
    at: tuple         # (ts, index among the COLL rows): which line to show


def _member_name(member: tuple) -> str:
    host, pid, device, comm = member
    where = f"process {pid}" if pid not in (None, -1) else f"comm {comm}"
    return where + (f" on {host}" if host else "") + (f" (GPU {device})" if device not in (None, -1) else "")


def _coll_calls(rows: pd.DataFrame, ev: pd.DataFrame) -> dict[tuple, list[_Call]]:
    """Calls grouped by communicator key; unprefixed lines join the member with their comm pointer."""
    inits = ev[(ev["source"] == "log") & in_values(ev["name"], ["NCCLCommInit"])]
    comm_ids = {}
    for host, pid, attrs in zip(text_values(inits["host"]), inits["pid"], inits["attrs"]):
        a = parse_attrs(attrs)
        if a.get("comm_id"):
            comm_ids[(host, int(pid), a.get("comm"))] = a["comm_id"]
    calls: list[_Call] = []
    for i, (ts, host, pid, device, attrs) in enumerate(zip(rows["ts"], text_values(rows["host"]), rows["pid"],
                                                           rows["device"], rows["attrs"])):
        a = parse_attrs(attrs)
        if a.get("op") in _COLL_P2P or a.get("opcount") is None:
            continue
        member = (a.get("coll_host", host), int(a.get("coll_pid", pid)), int(a.get("coll_device", device)),
                  a.get("comm", ""))
        calls.append(_Call(member, a["op"], a.get("count"), str(a.get("dtype")), a.get("root"), a.get("redop"),
                           a, (int(ts), i)))
    by_comm = {c.member[3]: c.member for c in calls if c.member[1] != -1}
    groups: dict[tuple, list[_Call]] = defaultdict(list)
    for c in calls:
        if c.member[1] == -1 and c.member[3] in by_comm:
            c.member = by_comm[c.member[3]]
        cid = comm_ids.get((c.member[0], c.member[1], c.member[3]))
        groups[("id", cid) if cid else ("size", c.a.get("nranks"))].append(c)
    return groups


def _ambiguous(key: tuple, calls: list[_Call]) -> bool:
    """Several communicators of one size cannot be told apart without their commIds."""
    if key[0] == "id":
        return False
    comms: dict[tuple, set] = defaultdict(set)
    for c in calls:
        comms[(c.member[0], c.member[1], c.member[2])].add(c.member[3])
    members = {c.member for c in calls}
    return any(len(v) > 1 for v in comms.values()) or (key[1] is not None and len(members) > key[1])


def _coll_disagreement(at: dict[tuple, list[_Call]]) -> tuple[str, dict[tuple, str]] | None:
    """(what differs, member -> its call in words) when the members' calls at one opCount disagree."""
    if len({tuple((c.op, c.count, c.dtype, c.root, c.redop) for c in cs) for cs in at.values()}) == 1:
        return None  # the common case: every rank logged the same call
    ops = {m: {c.op for c in cs} for m, cs in at.items()}
    members = list(at)
    if any(not (ops[a] & ops[b]) for i, a in enumerate(members) for b in members[i + 1:]):
        what = "op type"
    elif all(len(cs) == 1 for cs in at.values()) and len({cs[0].op for cs in at.values()}) == 1:
        op = next(iter(at.values()))[0].op
        checks = [("count", lambda c: c.count), ("datatype", lambda c: c.dtype)]
        checks += [("root", lambda c: c.root)] if op in _ROOTED else []
        checks += [("reduction op", lambda c: c.redop)] if op in _REDUCING else []
        what = next((name for name, key in checks if len({key(cs[0]) for cs in at.values()}) > 1), "")
        if not what:
            return None
    else:
        return None
    return what, {m: "; ".join(f"{c.op} count {c.count:,} {c.dtype}" if c.count is not None else c.op for c in cs)
                  for m, cs in at.items()}


def _culprits(described: dict[tuple, str]) -> list[tuple]:
    """The members whose call differs from the most common one (every member on a tie)."""
    tally = Counter(described.values())
    top = max(tally.values())
    if list(tally.values()).count(top) > 1:
        return sorted(described)
    common = next(v for v, n in tally.items() if n == top)
    return sorted(m for m, v in described.items() if v != common)


@feature("nccl_coll_mismatch", doc="NCCL COLL log lines (NCCL_DEBUG_SUBSYS=COLL) read across ranks: one row per "
         "communicator whose ranks log different collectives at one opCount (the first such opCount): "
         "attrs.opcount_hex, nranks, differs (op type, count, datatype, root, reduction op), sides (each "
         "rank's process, GPU and call), culprit (the ranks that differ from the most common call), detail. "
         "Send/Recv are left out; communicators of one size that the log cannot tell apart are not judged.")
def nccl_coll_mismatch(ctx) -> pd.DataFrame:
    ev = ctx.events
    rows = ev[(ev["source"] == "log") & in_values(ev["name"], ["NCCLColl"])]
    out = []
    for key, calls in (_coll_calls(rows, ev).items() if not rows.empty else ()):
        if _ambiguous(key, calls):
            continue
        by_opcount: dict[int, dict[tuple, list[_Call]]] = defaultdict(lambda: defaultdict(list))
        for c in calls:
            by_opcount[c.a["opcount"]][c.member].append(c)
        for opcount in sorted(by_opcount):
            at = by_opcount[opcount]
            found = _coll_disagreement(at) if len(at) > 1 else None
            if found:
                out.append(_coll_row(rows, key, opcount, at, *found))
                break
    return pd.DataFrame(out)


def _coll_row(rows: pd.DataFrame, key: tuple, opcount: int, at: dict[tuple, list[_Call]], what: str,
              described: dict[tuple, str]) -> dict:
    first = min((c for cs in at.values() for c in cs), key=lambda c: c.at)
    culprits = _culprits(described)
    nranks = first.a.get("nranks")
    detail = "; ".join(f"{_member_name(m)} runs {v}" for m, v in sorted(described.items()))
    attrs = {"opcount": opcount, "opcount_hex": first.a.get("opcount_hex"), "nranks": nranks,
             "comm_id": key[1] if key[0] == "id" else "", "differs": what, "detail": detail,
             "sides": [{"member": _member_name(m), "call": v} for m, v in sorted(described.items())],
             "culprit": ", ".join(_member_name(m) for m in culprits),
             "culprit_text": (f"{', '.join(_member_name(m) for m in culprits)} differ(s) from the other ranks"
                              if len(culprits) < len(described) else
                              "no call is in the majority, so each side may be the one that diverged"),
             "text": f"opCount {first.a.get('opcount_hex')}: {detail}"}
    row = rows.iloc[first.at[1]].to_dict()
    return row | {"kind": "marker", "name": "nccl_coll_mismatch", "attrs": json.dumps(attrs)}
