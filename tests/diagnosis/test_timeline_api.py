"""The timeline API on stored, diagnosed corpus traces: lanes and level of detail, zooming in
to a single kernel, the place of an evidence row, the Perfetto export and a log line's
context; another team's trace is a 404, an unfinished one a 409."""
import gzip
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ingest.uploads import create_trace
from tests.corpus import corpus
from tests.support.diagnosed_traces import diagnosed

URL = "/api/v1/traces/{}/timeline/"


@pytest.fixture
def nccl_trace(infra, alice, no_worker, corpus_dir):
    return diagnosed(infra, alice, "nccl_timeout")


@pytest.fixture
def graph_trace(infra, alice, no_worker, corpus_dir):
    return diagnosed(infra, alice, "cudagraph_abort")


def get(api, trace, **params):
    response = api.get(URL.format(trace.pk), params)
    assert response.status_code == 200, response.content[:500]
    return json.loads(response.content)


def test_lanes_per_device_stream_and_thread_and_a_budget_that_holds(alice_api, graph_trace):
    whole = get(alice_api, graph_trace, max_items=5000)
    lanes = {lane["id"]: lane for lane in whole["lanes"]}
    gpu = [lane for lane in lanes.values() if lane["group"] == "gpu"]
    assert gpu and all(lane["path"][1].startswith("GPU ") and lane["path"][2].startswith("stream ") for lane in gpu)
    assert any(lane["group"] == "cpu" and "thread" in lane["label"] for lane in lanes.values())
    bands = [i for i in whole["items"] if i["kind"] in ("finding", "violation")]
    finding = next(i for i in bands if i["kind"] == "finding")
    assert finding["ref"] == "F1" and lanes[finding["lane"]]["group"] == "findings"
    events = sum(lane["events"] for lane in lanes.values())
    assert not whole["merged"] and len(whole["items"]) == events + len(bands)

    small = get(alice_api, graph_trace, max_items=40)
    assert small["merged"] and len(small["items"]) <= 40
    merged = [i for i in small["items"] if i["count"] > 1]
    assert merged and all(i["busy_ns"] <= i["dur"] * i["count"] for i in merged)
    # every event of a lane with a share is in exactly one item: the counts add up
    per_lane = {}
    for item in small["items"]:
        per_lane[item["lane"]] = per_lane.get(item["lane"], 0) + item["count"]
    for lane_id, count in per_lane.items():
        if lanes[lane_id]["type"] != "bands":
            assert count == lanes[lane_id]["events"]


def test_zooming_in_on_a_kernel_returns_that_kernel_alone(alice_api, graph_trace):
    whole = get(alice_api, graph_trace, max_items=5000)
    origin = int(whole["origin"])
    kernel = max((i for i in whole["items"] if i["kind"] == "kernel"), key=lambda i: i["dur"])
    start, end = origin + kernel["ts"], origin + kernel["ts"] + kernel["dur"]
    zoomed = get(alice_api, graph_trace, start_ns=start, end_ns=end, max_items=50)
    same = [i for i in zoomed["items"] if i.get("row") == kernel["row"]]
    assert same and same[0]["count"] == 1 and same[0]["name"] == kernel["name"]
    assert all(i["ts"] < kernel["ts"] + kernel["dur"] and i["ts"] + max(i["dur"], 1) > kernel["ts"]
               for i in zoomed["items"] if i["kind"] not in ("finding", "violation") and i["count"] == 1)


def test_an_evidence_row_is_found_and_its_log_line_read_in_context(alice_api, nccl_trace):
    finding = nccl_trace.report["findings"][0]
    evidence = finding["evidence"][0]
    assert (evidence["artifact"], evidence["loc"]) == ("rank0.log", "line 112")
    body = get(alice_api, nccl_trace, artifact=evidence["artifact"], loc=evidence["loc"])
    found = body["found"]
    assert body["lanes"][found["lane"]]["group"] == "log"
    assert int(body["origin"]) + found["ts"] == evidence["ts"]
    around = get(alice_api, nccl_trace, start_ns=evidence["ts"] - 1000, end_ns=evidence["ts"] + 1000)
    assert any(i.get("row") == found["row"] and i["loc"] == "line 112" for i in around["items"])
    assert get(alice_api, nccl_trace, artifact="rank0.log", loc="line 999999")["found"] is None

    response = alice_api.get(f"/api/v1/traces/{nccl_trace.pk}/lines/", {"artifact": "rank0.log", "line": 112,
                                                                         "context": 3})
    lines = json.loads(response.content)["lines"]
    raw = corpus("h200", "nccl_timeout", "rank0.log").read_text().splitlines()
    assert [(l["line"], l["text"]) for l in lines] == [(n, raw[n - 1]) for n in range(109, 116)]
    assert alice_api.get(f"/api/v1/traces/{nccl_trace.pk}/lines/", {"artifact": "nope.log", "line": 1}).status_code == 404


def test_the_export_is_chrome_trace_json_of_the_range(alice_api, graph_trace):
    whole = get(alice_api, graph_trace, max_items=5000)
    origin = int(whole["origin"])
    timed = sorted((i for i in whole["items"] if i["kind"] == "kernel"), key=lambda i: i["ts"])
    start, end = origin + timed[0]["ts"], origin + timed[len(timed) // 2]["ts"]
    response = alice_api.get(URL.format(graph_trace.pk) + "export/", {"start_ns": start, "end_ns": end})
    assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
    chrome = json.loads(response.content)
    spans = [e for e in chrome["traceEvents"] if e["ph"] == "X"]
    kernels = [e for e in spans if e["cat"] == "kernel"]
    assert kernels and all((start - origin) / 1000 <= e["ts"] + e["dur"] and e["ts"] <= (end - origin) / 1000
                           for e in kernels)
    expected = sum(1 for i in timed if start <= origin + i["ts"] < end)
    assert len(kernels) >= expected
    names = {e["args"]["name"] for e in chrome["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert any(n.startswith("stream ") for n in names)


def test_other_teams_unfinished_traces_and_bad_ranges(alice_api, charlie_api, graph_trace, infra, alice):
    assert charlie_api.get(URL.format(graph_trace.pk)).status_code == 404
    assert charlie_api.get(f"/api/v1/traces/{graph_trace.pk}/lines/", {"artifact": "x", "line": 1}).status_code == 404
    assert alice_api.get(URL.format(graph_trace.pk), {"start_ns": 10, "end_ns": 5}).status_code == 400
    assert alice_api.get(URL.format(graph_trace.pk), {"max_items": 0}).status_code == 400
    fresh = create_trace(infra, alice, [SimpleUploadedFile("a.log", gzip.compress(b"x\n"))])
    assert alice_api.get(URL.format(fresh.pk)).status_code == 409
