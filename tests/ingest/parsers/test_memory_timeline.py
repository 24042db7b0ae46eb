"""torch.profiler's raw memory timeline export (public/memory_snapshot/hta_memory_timeline.raw.gz)."""
import gzip
import json

import pyarrow.parquet as pq
import pytest

from ingest.engine.events import ParseError
from ingest.engine.parse import parse_artifact
from tests.corpus import corpus

PATH = corpus("public", "memory_snapshot", "hta_memory_timeline.raw.gz")


def test_every_entry_becomes_an_event(tmp_path, corpus_dir):
    raw = json.loads(gzip.decompress(PATH.read_bytes()))
    report = parse_artifact(PATH, tmp_path / "m.parquet", "m")
    assert report.format == "memory_timeline" and report.events == len(raw)
    df = pq.read_table(tmp_path / "m.parquet").to_pandas()
    counts = df.groupby("name", observed=True).size().to_dict()
    by_action = {a: sum(1 for r in raw if r[1] == a) for a in (1, 2, 3, 4)}
    assert counts == {"preexisting": by_action[1], "create": by_action[2],
                      "increment_version": by_action[3], "destroy": by_action[4]}
    # bytes keep their sign: the net of all entries is what was still allocated at the end
    assert df["value"].sum() == sum(r[2] for r in raw)
    assert (df["ts"] > 0).all()  # preexisting (-1) entries sit at the first timestamp


def test_broken_entries_are_counted_not_fatal(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('[[10, 2, 512, 3], [11, 9, 512, 3], [12, 4, -512, 3]]')
    report = parse_artifact(path, tmp_path / "t.parquet", "t")
    assert report.format == "memory_timeline" and report.events == 2
    assert sum(report.skipped.values()) == 1


def test_truncated_file_names_the_offset(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('[[10, 2, 512, 3], [11, 4, -512')
    with pytest.raises(ParseError, match=r"t.json: byte \d+"):
        parse_artifact(path, tmp_path / "t.parquet", "t")
