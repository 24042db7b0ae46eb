"""POST /api/v1/traces/: files stored content-addressed, a trace queued for parsing."""
import hashlib
import io

from ingest.models import Trace
from tests.support.uploads import corpus_files, upload


def test_upload_creates_a_received_trace_with_its_artifacts(alice_api, alice, storage, no_worker, corpus_dir):
    paths = corpus_files()
    response = upload(alice_api, paths, name="capture abort", labels='{"env": "dev", "model": "toy"}')
    assert response.status_code == 201, response.content
    body = response.json()
    trace = Trace.objects.get(pk=body["id"])
    assert (trace.name, trace.labels, trace.state, trace.created_by) == (
        "capture abort", {"env": "dev", "model": "toy"}, "received", alice)
    assert body["team"] == "infra" and body["state"] == "received"
    stored = {a.name: a for a in trace.artifacts.all()}
    assert set(stored) == {p.name for p in paths}
    for p in paths:
        data = p.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        assert (stored[p.name].sha256, stored[p.name].size) == (digest, len(data))
        assert (storage / digest[:2] / digest).read_bytes() == data
    assert trace.bytes_total == sum(p.stat().st_size for p in paths)


def test_the_trace_is_queued_once_the_upload_is_committed(alice_api, no_worker, corpus_dir,
                                                          django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        trace_id = upload(alice_api, corpus_files()).json()["id"]
    assert no_worker.ids() == [trace_id]


def test_labels_filter_the_list(alice_api, no_worker, corpus_dir):
    upload(alice_api, corpus_files()[:1], labels="env=prod")
    upload(alice_api, corpus_files()[:1], labels="env=dev")
    names = [t["labels"] for t in alice_api.get("/api/v1/traces/?label=env=prod").json()["results"]]
    assert names == [{"env": "prod"}]
    assert alice_api.get("/api/v1/traces/?label=env__regex=.*").json()["results"] == []


def test_bad_labels_are_refused_with_the_reason(alice_api, no_worker, corpus_dir):
    response = upload(alice_api, corpus_files()[:1], labels='{"env": ')
    assert response.status_code == 400
    assert "labels" in str(response.json())


def test_no_files_is_a_400(alice_api, no_worker):
    assert alice_api.post("/api/v1/traces/", {"name": "x"}, format="multipart").status_code == 400


def test_a_member_of_several_teams_must_say_which(alice_api, alice, other, no_worker, corpus_dir):
    other.members.add(alice)
    assert upload(alice_api, corpus_files()[:1]).status_code == 400
    response = upload(alice_api, corpus_files()[:1], team="other")
    assert response.status_code == 201 and response.json()["team"] == "other"


def test_uploading_to_a_team_you_are_not_in_is_refused(alice_api, other, no_worker, corpus_dir):
    assert upload(alice_api, corpus_files()[:1], team="other").status_code == 400


def test_an_upload_over_the_limit_is_413(alice_api, settings, no_worker):
    settings.TRACEDOC_MAX_UPLOAD_BYTES = 1000
    f = io.BytesIO(b"x" * 5000)
    f.name = "big.log"
    response = alice_api.post("/api/v1/traces/", {"files": [f]}, format="multipart")
    assert response.status_code == 413
    assert Trace.objects.count() == 0


def test_the_report_is_409_until_the_trace_is_done(alice_api, no_worker, corpus_dir):
    trace_id = upload(alice_api, corpus_files()).json()["id"]
    response = alice_api.get(f"/api/v1/traces/{trace_id}/report/")
    assert response.status_code == 409
    assert response.json()["state"] == "received"


def test_wait_must_be_a_number(alice_api, no_worker):
    f = io.BytesIO(b"x")
    f.name = "a.log"
    assert alice_api.post("/api/v1/traces/?wait=abc", {"files": [f]}, format="multipart").status_code == 400
    assert Trace.objects.count() == 0
