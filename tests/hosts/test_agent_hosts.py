"""Agent hosts on the server: heartbeats make and move Host rows (team-scoped), the host list
and page show them with a stale marker, an Idempotency-Key makes a re-sent bundle the same
trace, capture requests go out in a heartbeat's answer once, and a wrapped command's exit
is shown on its trace page."""
from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.models import CaptureRequest, Host
from ingest.models import Trace
from tests.support.uploads import corpus_files, upload


def upload_keyed(client, key: str):
    path = corpus_files()[0]
    with open(path, "rb") as f:
        return client.post("/api/v1/traces/", {"files": [f]}, format="multipart", HTTP_IDEMPOTENCY_KEY=key)

H200 = {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-1234", "memory_total": 150 << 30, "driver": "580.1"}


def beat(client, **fields):
    body = {"host": "gpu-7", "agent_version": "1.2.3", "interval": 10, "gpus": [H200], **fields}
    response = client.post("/api/v1/hosts/heartbeat/", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_heartbeat_makes_the_host_and_the_next_one_moves_it(alice_api, infra):
    assert beat(alice_api) == {"host": "gpu-7", "team": "infra", "captures": []}
    host = Host.objects.get(team=infra, name="gpu-7")
    first = host.last_seen
    assert (host.agent_version, host.gpus, host.heartbeat_interval) == ("1.2.3", [H200], 10)
    beat(alice_api, agent_version="1.2.4", gpus=[], pending_bundles=3)
    host.refresh_from_db()
    assert host.last_seen > first and host.agent_version == "1.2.4" and host.pending_bundles == 3
    assert Host.objects.count() == 1


def test_the_host_list_merges_agents_with_hosts_named_by_traces(alice_api, infra, alice):
    beat(alice_api)
    trace = Trace.objects.create(team=infra, created_by=alice, labels={"host": "gpu-7"}, state="done",
                                 report={"trace": {"hosts": ["gpu-7", "gpu-9"]}, "summary": {"worst": "error"}})
    beat(alice_api, last_trace=trace.pk)
    rows = {r["host"]: r for r in alice_api.get("/api/v1/hosts/").json()}
    assert set(rows) == {"gpu-7", "gpu-9"}
    agent = rows["gpu-7"]
    assert agent["agent"] and not agent["stale"] and agent["gpus"] == [H200]
    assert agent["last_bundle_trace"] == trace.pk and agent["traces"] == 1 and agent["last_worst"] == "error"
    assert not rows["gpu-9"]["agent"] and rows["gpu-9"]["traces"] == 1


def test_a_host_is_stale_after_missed_heartbeats(alice_api, infra):
    beat(alice_api, interval=30)
    Host.objects.filter(name="gpu-7").update(last_seen=timezone.now() - timedelta(seconds=91))
    [row] = alice_api.get("/api/v1/hosts/").json()
    assert row["stale"]
    beat(alice_api, interval=30)
    [row] = alice_api.get("/api/v1/hosts/").json()
    assert not row["stale"]


def test_another_teams_hosts_and_captures_are_invisible(alice_api, charlie_api, infra):
    beat(alice_api)
    assert charlie_api.get("/api/v1/hosts/").json() == []
    assert charlie_api.post("/api/v1/captures/", {"host": "gpu-7", "kind": "profiler"}, format="json").status_code == 400
    capture = alice_api.post("/api/v1/captures/", {"host": "gpu-7", "kind": "profiler"}, format="json").json()
    assert charlie_api.get(f"/api/v1/captures/{capture['id']}/").status_code == 404


def test_a_heartbeat_needs_a_token(client):
    assert client.post("/api/v1/hosts/heartbeat/", {"host": "x"}, content_type="application/json").status_code in (401, 403)


def test_a_capture_request_goes_out_once_and_a_failure_comes_back(alice_api, infra):
    beat(alice_api)
    asked = alice_api.post("/api/v1/captures/", {"host": "gpu-7", "kind": "profiler", "steps": 5}, format="json")
    assert asked.status_code == 201 and asked.json()["state"] == "pending"
    rid = asked.json()["id"]
    [order] = beat(alice_api)["captures"]
    assert {k: order[k] for k in ("id", "kind", "steps", "trigger")} == {"id": rid, "kind": "profiler", "steps": 5,
                                                                          "trigger": "now"}
    assert 86000 < order["expires_in"] <= 86400  # a person's request waits a day for an agent
    assert beat(alice_api)["captures"] == []  # handed out once
    assert alice_api.get(f"/api/v1/captures/{rid}/").json()["state"] == "sent"
    beat(alice_api, failed_captures={str(rid): "no process took it"})
    body = alice_api.get(f"/api/v1/captures/{rid}/").json()
    assert body["state"] == "failed" and "no process took it" in body["error"]


def test_an_agent_bundle_with_a_capture_label_finishes_its_request(alice_api, infra, no_worker, corpus_dir):
    beat(alice_api)
    rid = alice_api.post("/api/v1/captures/", {"host": "gpu-7", "kind": "profiler"}, format="json").json()["id"]
    beat(alice_api)
    labels = f'{{"source": "tracedoc-agent", "host": "gpu-7", "capture_request": "{rid}"}}'
    trace_id = upload(alice_api, corpus_files()[:1], labels=labels).json()["id"]
    body = alice_api.get(f"/api/v1/captures/{rid}/").json()
    assert body["state"] == "done" and body["trace"] == trace_id and body["trace_url"].endswith(f"/traces/{trace_id}/")
    assert Host.objects.get(name="gpu-7").last_trace_id == trace_id  # the host's last bundle moves too


def test_a_repeated_idempotency_key_answers_with_the_first_trace(alice_api, infra, no_worker, corpus_dir,
                                                                 django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        first, again, other = (upload_keyed(alice_api, key) for key in ("bundle-1", "bundle-1", "bundle-2"))
    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 201)
    assert again.json()["id"] == first.json()["id"] != other.json()["id"]
    assert Trace.objects.count() == 2
    assert no_worker.ids() == [first.json()["id"], other.json()["id"]]  # the repeat queued nothing


def test_a_malformed_idempotency_key_is_refused(alice_api, infra, no_worker, corpus_dir):
    response = upload_keyed(alice_api, "no spaces allowed")
    assert response.status_code == 400 and Trace.objects.count() == 0


@pytest.fixture
def logged_in(client, alice):
    client.force_login(alice)
    return client


def test_the_hosts_page_lists_hosts_with_a_stale_marker(logged_in, alice_api, infra):
    beat(alice_api, host="gpu-live")
    beat(alice_api, host="gpu-gone")
    Host.objects.filter(name="gpu-gone").update(last_seen=timezone.now() - timedelta(hours=1))
    page = logged_in.get("/hosts/").content.decode()
    live = page[page.index('data-host="gpu-live"'):page.index('data-host="gpu-live"') + 2000].split("</tr>")[0]
    gone = page[page.index('data-host="gpu-gone"'):].split("</tr>")[0]
    assert "stale" not in live and "NVIDIA H200" in live and "1.2.3" in live
    assert "stale" in gone


def test_the_host_page_asks_for_a_capture(logged_in, alice_api, infra):
    beat(alice_api)
    host = Host.objects.get(name="gpu-7")
    response = logged_in.post(f"/hosts/{host.pk}/", {"kind": "flight_recorder", "steps": 1})
    assert response.status_code == 302
    capture = CaptureRequest.objects.get(host=host)
    assert (capture.kind, capture.state) == ("flight_recorder", "pending")
    page = logged_in.get(f"/hosts/{host.pk}/").content.decode()
    assert f'data-capture="{capture.pk}"' in page and "NCCL flight-recorder dump" in page


def test_a_trace_page_shows_how_the_wrapped_command_ended(logged_in, infra):
    trace = Trace.objects.create(team=infra, state="failed", error="x", labels={
        "capture": "wrap", "command": "python train.py", "exit_code": "137", "failed": "true", "signal": "SIGKILL"})
    page = logged_in.get(f"/traces/{trace.pk}/").content.decode()
    outcome = page[page.index('id="command-outcome"'):].split("</section>")[0]
    assert "python train.py" in outcome and "SIGKILL" in outcome and "137" in outcome


@pytest.mark.parametrize("field, value", [("pending_bundles", 395_700_277_290_742), ("last_trace", 10**30),
                                          ("last_trace", 0)])
def test_a_heartbeat_number_past_its_column_is_a_400(alice_api, infra, field, value):
    """(schemathesis found the first a 500: PostgreSQL's integer out of range)"""
    response = alice_api.post("/api/v1/hosts/heartbeat/", {"host": "gpu-1", field: value}, format="json")
    assert response.status_code == 400 and field in response.json()["detail"], response.content
