import json
import pickle

import pytest

from ingest.engine.events import ParseError
from ingest.engine.io import read_head
from ingest.engine.parsers.logs import parser as log
from ingest.engine.parsers.pytorch import flight_recorder
from ingest.engine.safe_pickle import load_path
from tests.corpus import corpus
from tests.ingest.parsers.helpers import parse_with

DUMP = ("h200", "nccl_timeout", "nccl_trace_rank_0")


@pytest.fixture(scope="module")
def dump(corpus_dir):
    return load_path(corpus(*DUMP))


def test_sniff_pickle_dump(corpus_dir):
    assert flight_recorder.sniff(read_head(corpus(*DUMP)), "x")
    assert not log.sniff(read_head(corpus(*DUMP)), "x")  # binary: not a text log


def test_every_entry_is_a_collective_row(dump):
    df, report = parse_with(flight_recorder, corpus(*DUMP))
    coll = df[df.kind == "collective"].sort_values("ts")
    entries = sorted(dump["entries"], key=lambda e: e["time_created_ns"])
    assert len(coll) == len(entries)
    assert list(coll.ts) == [e["time_created_ns"] for e in entries]
    assert list(coll["name"]) == [e["profiling_name"] for e in entries]
    assert list(coll.value) == [e["collective_seq_id"] for e in entries]
    for (_, row), e in zip(coll.iterrows(), entries):
        a = row.a
        assert a["state"] == e["state"] and a["pg_desc"] == e["process_group"][1]
        assert a["input_sizes"] == e["input_sizes"] and a["timeout_ms"] == e["timeout_ms"]
        assert a["frames"] == [dict(f) for f in e["frames"][:5]]
        assert a["rank"] == 0  # from the file name nccl_trace_rank_0
    # the collective that timed out (README: seq 7 never started)
    stuck = coll[coll.value == 7].iloc[0].a
    assert stuck["state"] == "scheduled" and stuck["time_discovered_started_ns"] is None
    assert report.meta["version"] == dump["version"] and report.meta["world_size"] == 1


def test_pg_status_marker(dump):
    df, _ = parse_with(flight_recorder, corpus(*DUMP))
    markers = df[(df.kind == "marker") & (df["name"] == "pg_status")]
    assert len(markers) == len(dump["pg_status"])
    a = markers.iloc[0].a
    expected = dump["pg_status"]["0"]
    assert (a["last_enqueued_collective"], a["last_completed_collective"]) == (
        expected["last_enqueued_collective"], expected["last_completed_collective"])
    assert (a["last_enqueued_collective"], a["last_completed_collective"]) == (8, 6)  # README's facts


def _json_dump(d: dict) -> dict:
    """The JSON encoding torch writes: stringified pg_status, 0 for 'not yet', no frames."""
    out = {k: v for k, v in d.items() if k != "entries"}
    out["pg_status"] = {k: {kk: str(vv) for kk, vv in v.items()} for k, v in d["pg_status"].items()}
    out["entries"] = [{k: (v if v is not None else 0) for k, v in e.items() if k != "frames"} | {
        "process_group": list(e["process_group"])} for e in d["entries"]]
    return out


def test_json_dump_gives_same_rows(dump, tmp_path):
    path = tmp_path / "rank_3.json"
    path.write_text(json.dumps(_json_dump(dump), sort_keys=True))
    assert flight_recorder.sniff(read_head(path), path.name)
    df, report = parse_with(flight_recorder, path)
    coll = df[df.kind == "collective"]
    assert len(coll) == len(dump["entries"])
    assert all(a["rank"] == 3 for a in coll.a)
    assert all(a["time_discovered_started_ns"] is None for a in coll.a)  # 0 means "not yet"
    marker = df[df["name"] == "pg_status"].iloc[0].a
    assert marker["last_enqueued_collective"] == 8
    assert report.meta["encoding"] == "json"


def test_json_dump_cut_in_the_middle(dump, tmp_path):
    text = json.dumps(_json_dump(dump), sort_keys=True)
    path = tmp_path / "nccl_trace_rank_1.json"
    path.write_text(text[: len(text) // 2])
    with pytest.raises(ParseError) as e:
        parse_with(flight_recorder, path)
    assert "byte" in e.value.where and "line" in e.value.where


def test_dump_with_a_global_is_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("hi",))
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(pickle.dumps({"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": [Evil()]}, protocol=2))
    assert flight_recorder.sniff(read_head(path), path.name)
    with pytest.raises(ParseError, match="print"):
        parse_with(flight_recorder, path)
