"""Two exports of one profile in one trace (a Kineto trace's .json.gz and the same .json) are
counted once: the diagnosis, the breakdowns and the timeline read the first file's events,
and the report names the second as a duplicate. A different profile of the same shape is
never taken for a duplicate."""
import gzip

import pyarrow as pa
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from diagnosis.tasks import diagnose_trace
from diagnosis.timeline_store import index_for
from ingest.engine.duplicate_profiles import find_duplicates
from ingest.models import Trace
from ingest.tasks import parse_trace
from ingest.uploads import create_trace
from tests.corpus import corpus

pytestmark = pytest.mark.timeout(300)

KINETO = corpus("h200", "sync_stall_decode", "kineto_trace.json.gz")


def diagnosed(team, user, files: dict[str, bytes]) -> Trace:
    trace = create_trace(team, user, [SimpleUploadedFile(name, data) for name, data in files.items()])
    parse_trace(trace.pk)
    diagnose_trace(trace.pk)
    trace.refresh_from_db()
    assert trace.state == Trace.State.DONE, trace.error
    return trace


def kernel_counts(report: dict) -> list[tuple]:
    return [(k["artifact"], k["device"], [(t["kernel_type"], t["count"]) for t in k["by_type"]])
            for k in report["breakdowns"]["kernels"]]


@pytest.mark.django_db
def test_the_gz_and_the_plain_export_of_one_kineto_trace_count_each_kernel_once(infra, alice, no_worker):
    gz = KINETO.read_bytes()
    once = diagnosed(infra, alice, {"kineto_trace.json.gz": gz})
    twice = diagnosed(infra, alice, {"kineto_trace.json.gz": gz, "kineto_trace.json": gzip.decompress(gz)})
    single, double = once.report, twice.report

    assert sum(t["count"] for k in single["breakdowns"]["kernels"] for t in k["by_type"]) > 100
    assert kernel_counts(double) == kernel_counts(single)
    assert double["breakdowns"] == single["breakdowns"]
    assert double["trace"]["events"] == single["trace"]["events"]
    assert [(f["rule_id"], f["title"]) for f in double["findings"]] == \
        [(f["rule_id"], f["title"]) for f in single["findings"]]

    # the report says which file was left out and why
    note = next(w for w in double["trace"]["warnings"] if "kineto_trace.json " in w)
    assert "kineto_trace.json.gz" in note and "counted once" in note
    listed = {a["path"]: a["warnings"] for a in double["trace"]["artifacts"]}
    assert any("counted once" in w for w in listed["kineto_trace.json"])
    assert not any("counted once" in w for w in listed["kineto_trace.json.gz"])
    assert not any("counted once" in w for w in single["trace"]["warnings"])

    # the timeline reads the same events: one file's lanes, as many events as the single upload
    one, both = index_for(once), index_for(twice)
    assert len(both.ts) == len(one.ts) and [lane.label for lane in both.lanes] == [lane.label for lane in one.lanes]


def table(ts: list[int], name: str = "k") -> pa.Table:
    return pa.table({"ts": ts, "dur": [5] * len(ts), "kind": ["kernel"] * len(ts), "name": [name] * len(ts),
                     "artifact": ["a"] * len(ts)})


def test_only_the_same_events_of_the_same_parser_are_duplicates():
    same, shifted = table([1, 2, 3]), table([1, 1, 3])  # same count and time range, one event moved
    renamed = table([1, 2, 3], name="other")
    found = find_duplicates({"a.json": same, "b.json": table([1, 2, 3]), "c.json": shifted, "d.json": renamed,
                             "e.pb": table([1, 2, 3])},
                            {"a.json": "kineto", "b.json": "kineto", "c.json": "kineto", "d.json": "kineto",
                             "e.pb": "otlp_pb"})
    assert [(d.name, d.original, d.events) for d in found] == [("b.json", "a.json", 3)]
    # no timed event (two logs of untimed lines, or nothing): never a duplicate
    assert find_duplicates({"a": table([0, 0]), "b": table([0, 0])}, {"a": "log", "b": "log"}) == []
    assert find_duplicates({"a": table([]), "b": table([])}, {"a": "kineto", "b": "kineto"}) == []
