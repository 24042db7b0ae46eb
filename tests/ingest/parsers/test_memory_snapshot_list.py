"""The old torch.cuda.memory_snapshot() pickle: a bare list of segments (no history, no
'segments' key), read through the safe unpickler like the _dump_snapshot dict (issue 33)."""
import pickle

import pytest

from diagnosis.engine import scenarios
from ingest.engine.io import read_head
from ingest.engine.parsers.pytorch import memory_snapshot
from ingest.engine.safe_pickle import load_path
from tests.corpus import CORPUS, corpus
from tests.ingest.parsers.helpers import parse_with

# the keys torch 1.x put in a segment and a block (no addresses on blocks, no frames, no requested_size)
OLD_SEGMENTS = [
    {"device": 0, "address": 139_800_000_000_000, "total_size": 20 * 2**20, "allocated_size": 8 * 2**20,
     "active_size": 8 * 2**20, "stream": 0, "segment_type": "large",
     "blocks": [{"size": 8 * 2**20, "state": "active_allocated"}, {"size": 12 * 2**20, "state": "inactive"}]},
    {"device": 0, "address": 139_800_100_000_000, "total_size": 2 * 2**20, "allocated_size": 0,
     "active_size": 0, "stream": 0, "segment_type": "small", "blocks": [{"size": 2 * 2**20, "state": "inactive"}]},
]


def _samples(df):
    s = df[df.kind == "sample"]
    return dict(zip(s["name"], s.value))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_old_list_pickle_is_a_snapshot(tmp_path, protocol):
    path = tmp_path / "snapshot.pickle"
    path.write_bytes(pickle.dumps(OLD_SEGMENTS, protocol=protocol))
    assert memory_snapshot.sniff(read_head(path), path.name)
    df, report = parse_with(memory_snapshot, path)
    got = _samples(df)
    assert got["memory.reserved"] == 22 * 2**20 and got["memory.allocated"] == 8 * 2**20
    assert got["memory.largest_free_block"] == 12 * 2**20 and got["memory.segments_with_live_block"] == 1
    assert any("bare list of segments" in w for w in report.warnings)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not found")
def test_list_form_gives_the_dict_forms_figures(tmp_path):
    snap = load_path(corpus("h200", "oom_true_fragmentation", "memory_snapshot.pickle"))
    as_list = tmp_path / "memory_snapshot.pickle"
    as_list.write_bytes(pickle.dumps(snap["segments"], protocol=4))
    whole = tmp_path / "whole.pickle"
    whole.write_bytes(pickle.dumps({"segments": snap["segments"]}, protocol=4))
    listed, _ = parse_with(memory_snapshot, as_list)
    dicted, _ = parse_with(memory_snapshot, whole)
    assert _samples(listed) == _samples(dicted)


def test_the_pipeline_detects_it(tmp_path):
    path = tmp_path / "segments.pkl"
    path.write_bytes(pickle.dumps(OLD_SEGMENTS, protocol=2))
    report = scenarios.report(path)
    (artifact,) = report["trace"]["artifacts"]
    assert artifact["format"] == "memory_snapshot" and artifact["events"] > 0


def test_other_lists_are_not_snapshots(tmp_path):
    for value in ([{"name": "x", "size": 1}], [1, 2, 3], {"total_size": 1}):
        path = tmp_path / "other.pickle"
        path.write_bytes(pickle.dumps(value, protocol=4))
        assert not memory_snapshot.sniff(read_head(path), path.name)


def test_a_refusal_says_what_was_expected(tmp_path):
    """Issue 33: every refusal reads "expected ...; got ...", not "a known trace format; got ..."."""
    import pytest as _pytest

    from ingest.engine.events import ParseError
    from ingest.engine.parsers import detect
    path = tmp_path / "junk.bin"
    path.write_bytes(bytes(range(256)) * 4)
    with _pytest.raises(ParseError) as err:
        detect(path)
    assert "expected a known trace format; got binary data" in str(err.value)
