"""A memory snapshot whose `allocator_settings` (or any value) is a pickle of shared references
(a list of two references to the list before it, 60 times: 2^60 objects once walked) fails
as unusable input naming the bound, where in the data, and its setting, at once: before, a
12 KB pickle ran 140 s to 1.88 GB and was reported as an internal error. Cycles and deep
nesting are refused the same way."""
from __future__ import annotations

import pickle

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ingest.engine.safe_pickle import MAX_DEPTH, check_objects
from ingest.tasks import parse_trace
from ingest.uploads import create_trace
from tests.ingest.hostile import parse_isolated

pytestmark = pytest.mark.timeout(120)


def doubling(levels: int) -> list:
    shared: list = []
    for _ in range(levels):
        shared = [shared, shared]
    return shared


def snapshot(settings) -> bytes:
    return pickle.dumps({"segments": [{"device": 0, "address": 1, "total_size": 2, "blocks": []}],
                         "device_traces": [], "allocator_settings": settings}, protocol=4)


def test_shared_references_in_allocator_settings_fail_at_once_naming_the_bound(tmp_path):
    path = tmp_path / "snapshot.pickle"
    path.write_bytes(snapshot({"expandable_segments": doubling(60)}))
    cost = parse_isolated("snapshot.pickle", path, timeout=60)
    assert cost["error"].startswith("snapshot.pickle: at ['allocator_settings']['expandable_segments'][0]")
    assert "at most 10,000,000 objects for a pickle of" in cost["error"]
    assert "TRACEDOC_MAX_PICKLE_OBJECTS" in cost["error"] and "internal error" not in cost["error"]
    assert cost["seconds"] < 5 and cost["peak_mib"] < 300, cost


def test_the_same_in_a_trace_is_an_artifact_error_not_an_internal_one(infra, alice, no_worker):
    trace = create_trace(infra, alice, [SimpleUploadedFile("snap.pickle", snapshot(doubling(50)))])
    parse_trace(trace.pk)
    trace.refresh_from_db()
    artifact = trace.artifacts.get()
    assert artifact.error.startswith("snap.pickle: at ['allocator_settings'][0][0]"), artifact.error
    assert "TRACEDOC_MAX_PICKLE_OBJECTS" in artifact.error and "internal error" not in artifact.error


def test_a_cycle_and_deep_nesting_are_refused_naming_where():
    cycle: dict = {"a": []}
    cycle["a"].append(cycle)
    with pytest.raises(Exception) as e:
        check_objects(pickle.loads(pickle.dumps({"allocator_settings": cycle})), "c.pickle", 100)
    assert str(e.value) == "c.pickle: at ['allocator_settings']['a'][0]: expected plain data without cycles; " \
                           "got an object that contains itself"
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(Exception) as e:
        check_objects(deep, "d.pickle", 100)
    assert f"expected data nested at most {MAX_DEPTH} levels deep; got deeper nesting" in str(e.value)


def test_plain_data_is_counted_as_a_reader_walks_it():
    shared = ["x" * 640, 1]
    assert check_objects({"a": shared, "b": shared}, "p", 100) == 1 + 2 * (1 + (1 + 10) + 1) + 2
