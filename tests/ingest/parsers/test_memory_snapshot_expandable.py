"""Memory snapshots of expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): the
allocator grows and shrinks them with `segment_map` / `segment_unmap` records, which are reserve and
release actions, not skipped markers, and the OOM finding says what the snapshot's figures count and
what the history mapped (issue 33). Fixture: a real OOM on an H100
(tests/fixtures/captures/h100_issue33/make_captures.py)."""
from __future__ import annotations

import json
from pathlib import Path

from diagnosis.engine import scenarios
from ingest.engine.parsers.pytorch import memory_snapshot
from tests.ingest.parsers.helpers import parse_with

SNAPSHOT = Path(__file__).resolve().parents[2] / "fixtures" / "captures" / "h100_issue33" / "memory_snapshot_expandable.pickle"
MIB = 2**20


def test_map_and_unmap_are_reserve_and_release(parse):
    result, df = parse(SNAPSHOT)
    assert result.format == "memory_snapshot" and not result.error
    actions = df[df.name.isin(["segment_map", "segment_unmap"])]
    assert set(actions[actions.name == "segment_map"].kind) == {"alloc"}
    assert set(actions[actions.name == "segment_unmap"].kind) == {"free"}
    assert len(actions) == 153 + 51
    _, report = parse_with(memory_snapshot, SNAPSHOT)
    assert not [k for k in report.skipped if "segment_map" in k or "segment_unmap" in k]  # nothing left out


def test_figures_count_the_expandable_segments_and_the_pages_moved(parse):
    _, df = parse(SNAPSHOT)
    samples = df[df.kind == "sample"].set_index("name").value
    assert samples["memory.expandable_segments"] == samples["memory.segments"] == 51
    mapped = df[df.name == "segment_map"].value.sum()
    unmapped = df[df.name == "segment_unmap"].value.sum()
    assert samples["memory.segment_mapped"] == mapped and samples["memory.segment_unmapped"] == unmapped
    # what stays mapped is what the snapshot's segments hold: the history covers the whole run here
    assert mapped - unmapped == samples["memory.reserved"]


def test_the_oom_finding_says_what_the_figures_count():
    report = scenarios.report(SNAPSHOT)
    (oom,) = [f for f in report["findings"] if f["root_cause"].startswith("cuda_oom.")]
    assert oom["root_cause"] == "cuda_oom.capacity"  # 39.33 GiB asked with 26.87 GiB free
    text = oom["explanation"]
    assert "51 of 51 segments are expandable" in text
    assert "mapped 76.50 GiB and unmapped 24.71 GiB" in text


def test_a_snapshot_without_expandable_segments_reads_as_before(corpus_dir, parse):
    _, df = parse(corpus_dir / "h200" / "oom_true_fragmentation" / "memory_snapshot.pickle")
    samples = df[df.kind == "sample"].set_index("name").value
    assert samples["memory.expandable_segments"] == 0 and "memory.segment_mapped" not in samples
    attrs = [json.loads(a) for a in df[df.name == "memory.segment"].attrs]
    assert not any(a.get("is_expandable") for a in attrs)
