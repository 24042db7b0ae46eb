"""The public flight-recorder tutorial output: its side-by-side dump (`fr_trace -j`) aligned by
our code must reach the verdict that torch's analyzer printed in the same file."""
from __future__ import annotations

import re

from rules.engine.features.collectives import FrEntry, first_divergences
from tests.corpus import corpus

CALL = re.compile(r"(\w+)\(input_sizes=(\[\[[\d, ]*\]\]), state=(\w+)\)")


def side_by_side_entries(text: str) -> list[FrEntry]:
    """Entries from the `fr_trace -j` table: one column per rank, one row per sequence id
    (numbered from 0, as the file's Collectives table numbers them)."""
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("Rank 0") and "Rank 1" in line)
    columns = [(int(m.group(1)), m.start()) for m in re.finditer(r"Rank (\d+)", lines[header])]
    entries = []
    for seq, line in enumerate(lines[header + 2:]):
        if not CALL.search(line):
            break
        for rank, start in columns:
            m = CALL.match(line[start:].lstrip()) if len(line) > start else None
            if m:
                entries.append(FrEntry(rank=rank, pg="main_comm", seq=seq, op=f"nccl:{m.group(1)}",
                                       input_sizes=m.group(2).replace(" ", ""), state=m.group(3)))
    return entries


def test_tutorial_hang_is_rank_1_missing_the_last_all_reduce():
    text = corpus("public", "flight_recorder", "fr_trace_outputs_tutorial_debug_hangs.txt").read_text()
    expected_seq = int(re.search(r"Not all ranks joining collective, sequence number: (\d+)", text).group(1))
    expected_missing = sorted(int(r) for r in re.search(r"missing ranks: \{([\d, ]+)\}", text).group(1).split(","))
    entries = side_by_side_entries(text)
    assert {e.rank for e in entries} == {0, 1} and len(entries) == 9
    [d] = first_divergences(entries, {})
    assert (d.cause, d.seq, d.culprit_ranks) == ("peer_missing", expected_seq, expected_missing)
    assert d.entry.op == "nccl:all_reduce" and d.entry.input_sizes == "[[1024]]"
