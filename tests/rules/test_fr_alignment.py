"""Cross-rank alignment on small synthetic flight-recorder entry lists, and the timeout verdict."""
from __future__ import annotations

from rules.engine.features.collectives import FrEntry, first_divergences, fr_entries, worst_straggles
from rules.engine.features.nccl import verdict
from tests.rules.helpers import events

MS = 1_000_000


def entry(rank, seq, op="nccl:all_reduce", sizes="[[1024]]", dtypes='["Float"]', state="completed",
          created_ms=0.0, pg="0", pg_id=0, pg_desc="default_pg"):
    return FrEntry(rank=rank, pg=pg, seq=seq, op=op, input_sizes=sizes, output_sizes=sizes, dtypes=dtypes,
                   state=state, created_ns=int(created_ms * MS), pg_id=pg_id, pg_desc=pg_desc)


def lockstep(ranks, seqs, **kw):
    return [entry(r, s, created_ms=s, **kw) for s in seqs for r in ranks]


def test_a_rank_that_never_enqueued_the_sequence_id_is_missing():
    entries = lockstep([0, 1, 2], range(1, 5)) + [entry(0, 5, state="started"), entry(2, 5, state="started")]
    [d] = first_divergences(entries, {(0, "0"): 5, (1, "0"): 4, (2, "0"): 5})
    assert (d.cause, d.seq, d.culprit_ranks, d.ranks) == ("peer_missing", 5, [1], [0, 1, 2])
    assert "never by rank(s) [1]" in d.reason and "4 on rank 1" in d.reason


def test_entries_evicted_from_a_ring_buffer_are_not_missing():
    # rank 1's buffer kept only seq 3..4; seq 1..2 are gone from it, not skipped by it
    entries = lockstep([0], range(1, 5)) + lockstep([1], range(3, 5))
    assert first_divergences(entries, {(0, "0"): 4, (1, "0"): 4}) == []


def test_size_mismatch_blames_the_minority():
    entries = lockstep([0, 1, 2, 3], range(1, 3)) + [entry(r, 3, sizes="[[2048]]" if r == 2 else "[[1024]]")
                                                     for r in range(4)]
    [d] = first_divergences(entries, {})
    assert (d.cause, d.seq, d.culprit_ranks, d.differs) == ("collective_mismatch", 3, [2], "input sizes")
    assert d.entry.rank == 2
    assert d.reason == "input sizes [[2048]] on rank 2, where rank(s) [0, 1, 3] passed [[1024]]"


def test_op_is_checked_before_sizes_and_a_tie_trusts_the_lowest_rank():
    entries = [entry(0, 1), entry(1, 1, op="nccl:broadcast", sizes="[[8]]")]
    [d] = first_divergences(entries, {})
    assert (d.differs, d.culprit_ranks) == ("op", [1])


def test_dtype_mismatch():
    entries = [entry(0, 1), entry(1, 1, dtypes='["Half"]')]
    [d] = first_divergences(entries, {})
    assert (d.cause, d.differs, d.culprit_ranks) == ("collective_mismatch", "dtypes", [1])


def test_all_to_all_may_differ_in_sizes():
    entries = [entry(0, 1, op="nccl:all_to_all", sizes="[[10]]"), entry(1, 1, op="nccl:all_to_all", sizes="[[30]]")]
    assert first_divergences(entries, {}) == []


def test_a_rank_where_it_never_started_while_others_did():
    entries = lockstep([0, 1], range(1, 3)) + [entry(0, 3, state="started"), entry(1, 3, state="scheduled")]
    [d] = first_divergences(entries, {})
    assert (d.cause, d.culprit_ranks) == ("not_started", [1])


def test_only_the_first_divergence_of_each_group_is_reported():
    entries = ([entry(0, 1), entry(1, 1, sizes="[[1]]"), entry(0, 2), entry(1, 2, op="nccl:broadcast")]
               + [entry(0, 1, pg="tp"), entry(1, 1, pg="tp", dtypes='["Half"]')])
    found = {(d.pg, d.seq, d.differs) for d in first_divergences(entries, {})}
    assert found == {("0", 1, "input sizes"), ("tp", 1, "dtypes")}


def test_a_single_rank_cannot_diverge():
    assert first_divergences(lockstep([0], range(1, 4)), {(0, "0"): 9}) == []


def test_straggle_is_where_the_lag_grew_not_where_it_is_largest():
    # rank 2 is 3 s late at seq 4 and stays ~3 s late for seq 5..6 (its peers ran ahead)
    entries = [entry(r, 1, created_ms=900 if r == 1 else 0) for r in range(3)]      # start-up skew: ignored
    entries += [entry(r, s, created_ms=1000 + s) for s in (2, 3) for r in range(3)]
    entries += [entry(r, s, created_ms=1000 + s + (3000 + s if r == 2 else 0)) for s in (4, 5, 6) for r in range(3)]
    [s] = worst_straggles(entries)
    assert (s.seq, s.late_rank, s.first_rank, s.collectives) == (4, 2, 0, 5)
    assert s.lag_ms == 3004 and s.grown_ms == 3004


def test_fr_entries_skip_p2p_and_unknown_ranks():
    def row(rank, seq, **attrs):
        return {"ts": seq * MS, "kind": "collective", "name": "nccl:all_reduce", "source": "flight_recorder",
                "attrs": {"rank": rank, "pg_name": "0", "collective_seq_id": seq, "state": "completed", **attrs}}
    status = {"ts": 9, "kind": "marker", "name": "pg_status", "source": "flight_recorder",
              "attrs": {"rank": 1, "pg_id": 0, "pg_name": "0", "last_enqueued_collective": 7}}
    ev = events([row(0, 1), row(0, 2, is_p2p=True), row(None, 3), status])
    entries, last = fr_entries(ev)
    assert [(e.rank, e.seq) for e in entries] == [(0, 1)]
    assert last == {(1, "0"): 7}


def _timeout(**kw):
    return {"rank": 0, "seq": 5, "pg_id": 0, "pg": "default_pg", "op": "ALLREDUCE", **kw}


def test_verdict_names_the_missing_rank_from_the_alignment():
    entries = lockstep([0, 1], range(1, 5)) + [entry(0, 5, state="started")]
    divs = first_divergences(entries, {(0, "0"): 5, (1, "0"): 4})
    cause, reason, capture, culprits = verdict(_timeout(), {}, {}, divs)
    assert (cause, culprits, capture) == ("peer_missing", [1], "")


def test_verdict_routes_a_mismatch_to_the_mismatch_rule():
    divs = first_divergences([entry(0, 5), entry(1, 5, sizes="[[1]]")], {})
    assert verdict(_timeout(), {}, {}, divs)[0] == "collective_mismatch"


def test_verdict_ignores_divergences_of_other_groups_and_later_seqs():
    later = first_divergences([entry(0, 9), entry(1, 9, sizes="[[1]]")], {})
    tp = {"pg": "7", "pg_id": 1, "pg_desc": "tp_group"}
    other = first_divergences([entry(0, 1, **tp), entry(1, 1, sizes="[[1]]", **tp)], {})
    for divs in (later, other):
        assert len(divs) == 1
        assert verdict(_timeout(), {}, {}, divs)[0] == "undetermined"
    assert verdict(_timeout(pg="tp_group", pg_id=1), {}, {}, other)[0] == "collective_mismatch"


def test_verdict_trusts_a_started_entry_over_a_lagging_pg_status():
    entries = {(0, "0", 5): {"state": "started"}}
    status = {(0, "0"): {"last_started_collective": 4, "last_completed_collective": 4}}
    assert verdict(_timeout(pg="0"), entries, status)[0] == "undetermined"
    entries[(0, "0", 5)]["state"] = "scheduled"
    assert verdict(_timeout(pg="0"), entries, status)[:1] + verdict(_timeout(pg="0"), entries, status)[3:] == (
        "stream_blocked", [0])
