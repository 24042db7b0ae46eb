"""Timeline search and range totals on a stored, diagnosed corpus trace (h200/launch_bound_decode:
Kineto with launches and kernels): search lists every event whose name holds the text, in time
order, page by page; launch calls and their kernels carry the correlation id that pairs them;
a selected range's totals (events, busy time as the union of clipped spans) agree with a
count over the event table; the selection panel refuses bad ranges and other teams' traces."""
import json

import numpy as np
import pandas as pd
import pytest

from diagnosis.timeline_store import index_for
from diagnosis.engine.timeline.totals import totals, union_ns
from tests.support.diagnosed_traces import diagnosed

SEARCH = "/api/v1/traces/{}/timeline/search/"


@pytest.fixture
def launch_trace(infra, alice, no_worker, corpus_dir):
    return diagnosed(infra, alice, "launch_bound_decode")


def kernel_rows(index) -> pd.DataFrame:
    gpu = [lane.id for lane in index.lanes if lane.group == "gpu"]
    rows = np.concatenate([np.arange(*index.lane_slice(g).indices(len(index.ts))) for g in gpu])
    frame = pd.DataFrame({"ts": index.ts[rows], "end": index.end[rows], "row": index.row[rows],
                          "name": index.names[index.name[rows]], "kind": [index.kinds[k] for k in index.kind[rows]],
                          "corr": index.corr[rows]})
    return frame[frame["kind"] == "kernel"]


def test_search_lists_every_match_in_time_order_page_by_page(alice_api, launch_trace):
    index = index_for(launch_trace)
    kernels = kernel_rows(index)
    name = kernels["name"].value_counts().index[0]
    query = name[len(name) // 3: len(name) // 3 + 12].upper()   # a piece of the name, other case
    every = [str(n) for n in index.names[index.name] if query.lower() in str(n).lower()]
    first = json.loads(alice_api.get(SEARCH.format(launch_trace.pk), {"q": query, "limit": 7}).content)
    assert first["total"] == len(every) > 7
    assert len(first["matches"]) == 7 and all(query.lower() in m["name"].lower() for m in first["matches"])
    listed = list(first["matches"])
    while len(listed) < first["total"]:
        page = json.loads(alice_api.get(SEARCH.format(launch_trace.pk),
                                        {"q": query, "offset": len(listed), "limit": 500}).content)
        assert page["matches"], "a page came back empty before the last match"
        listed += page["matches"]
    times = [m["ts"] for m in listed]
    assert len(times) == len(every) and times == sorted(times)
    assert {n["name"] for n in first["names"]} >= {name} and sum(n["count"] for n in first["names"]) <= len(every)
    none = json.loads(alice_api.get(SEARCH.format(launch_trace.pk), {"q": "no such kernel name (.*)"}).content)
    assert none["total"] == 0 and none["matches"] == []
    assert alice_api.get(SEARCH.format(launch_trace.pk), {"q": "x" * 201}).status_code == 400


def test_launches_and_their_kernels_share_a_correlation_id(alice_api, launch_trace):
    index = index_for(launch_trace)
    kernels = kernel_rows(index)
    paired = kernels[kernels["corr"] >= 0]
    assert len(paired) == len(kernels)
    launch_kind = {index.kinds.index(k) for k in ("runtime", "driver") if k in index.kinds}
    launches = np.flatnonzero(np.isin(index.kind, list(launch_kind)) & (index.corr >= 0))
    assert set(paired["corr"]) <= set(index.corr[launches].tolist())
    # the API's single events carry it: a view around one kernel shows it and its launch
    k = paired.iloc[len(paired) // 2]
    launch = launches[index.corr[launches] == k["corr"]][0]
    start, end = int(min(index.ts[launch], k["ts"])) - 1000, int(max(index.end[launch], k["end"])) + 1000
    body = json.loads(alice_api.get(f"/api/v1/traces/{launch_trace.pk}/timeline/",
                                    {"start_ns": start, "end_ns": end, "max_items": 20000}).content)
    by_row = {i["row"]: i for i in body["items"] if "row" in i}
    assert by_row[int(k["row"])]["corr"] == by_row[int(index.row[launch])]["corr"] == k["corr"]


def test_range_totals_agree_with_the_event_table(launch_trace):
    index = index_for(launch_trace)
    kernels = kernel_rows(index)
    start = int(kernels["ts"].quantile(0.25))
    end = int(kernels["ts"].quantile(0.5))
    result = totals(index, start, end)
    gpu = next(lane for lane in result.lanes if lane.group == "gpu")
    rows = np.arange(*index.lane_slice(gpu.lane).indices(len(index.ts)))
    inside = rows[(index.end[rows] > start) & (index.ts[rows] < end)]
    assert gpu.count == len(inside)
    clipped = [(max(int(index.ts[i]), start), min(int(index.end[i]), end)) for i in inside]
    covered = np.zeros(end - start, bool)   # the union, one ns at a time
    for s, e in clipped:
        covered[s - start:e - start] = True
    assert gpu.busy_ns == int(covered.sum())
    assert gpu.summed_ns == sum(e - s for s, e in clipped) >= gpu.busy_ns
    assert result.gpu_names and result.gpu_names[0].summed_ns == max(n.summed_ns for n in result.gpu_names)
    assert union_ns(np.array([0, 5, 20]), np.array([10, 8, 30])) == 20


def test_selection_panel_refuses_bad_ranges_and_other_teams(client, alice, charlie, launch_trace):
    url = f"/traces/{launch_trace.pk}/timeline/selection/"
    index = index_for(launch_trace)
    client.force_login(alice)
    answer = client.get(url, {"start_ns": index.start_ns, "end_ns": index.end_ns})
    assert answer.status_code == 200 and b"selection-lanes" in answer.content
    assert client.get(url, {"start_ns": 10, "end_ns": 5}).status_code == 400
    assert client.get(url, {"start_ns": "x", "end_ns": 5}).status_code == 400
    assert client.get(url, {"start_ns": 1, "end_ns": 2 ** 70}).status_code == 400
    client.force_login(charlie)
    assert client.get(url, {"start_ns": index.start_ns, "end_ns": index.end_ns}).status_code == 404
