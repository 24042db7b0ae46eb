"""The HTML pages: login required, the list, the upload form, the trace page and its
polling partial, cluster triage through htmx."""
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from diagnosis.models import ClusterRecord
from ingest.models import Trace
from ingest.tasks import parse_trace
from tests.corpus import corpus

PAGES = ["/", "/traces/new/", "/clusters/"]


@pytest.fixture
def logged_in(client, alice):
    client.force_login(alice)
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("url", PAGES + ["/traces/1/"])
def test_pages_redirect_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


@pytest.mark.django_db
def test_the_login_page_renders(client):
    assert b'name="password"' in client.get("/accounts/login/").content


@pytest.mark.parametrize("url", PAGES)
def test_pages_render_for_a_member(logged_in, url):
    body = logged_in.get(url).content.decode()
    assert "htmx" in body and "/static/css/app.css" in body


def test_upload_form_stores_the_files_and_shows_the_trace(logged_in, no_worker, corpus_dir):
    folder = corpus("h200", "cudagraph_abort")
    files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted(folder.iterdir())]
    response = logged_in.post("/traces/new/", {"files": files, "name": "abort", "labels": "env=dev"})
    trace = Trace.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/traces/{trace.pk}/"
    assert (trace.name, trace.labels, trace.artifacts.count()) == ("abort", {"env": "dev"}, 2)
    page = logged_in.get(response["Location"]).content.decode()
    assert 'hx-trigger="every 1s"' in page and "kineto_trace.json.gz" in page


def test_upload_form_without_files_shows_the_error(logged_in):
    response = logged_in.post("/traces/new/", {"name": "x"})
    assert response.status_code == 200 and Trace.objects.count() == 0
    assert "error" in response.content.decode()


def test_the_list_shows_state_and_labels(logged_in, infra):
    Trace.objects.create(team=infra, name="decode p99", labels={"env": "prod"})
    body = logged_in.get("/").content.decode()
    assert "decode p99" in body and "env=prod" in body and "state-received" in body
    assert 'hx-trigger="every 2s"' in body  # keeps refreshing while a trace is in progress


def test_progress_partial_polls_until_finished_then_reloads(logged_in, infra):
    trace = Trace.objects.create(team=infra, name="t")
    partial = logged_in.get(f"/traces/{trace.pk}/progress/", HTTP_HX_REQUEST="true")
    assert 'hx-trigger="every 1s"' in partial.content.decode()
    trace.transition("parsing")
    trace.transition("failed", error="x.log: byte 0: expected a trace, log or dump; got an empty file")
    finished = logged_in.get(f"/traces/{trace.pk}/progress/", HTTP_HX_REQUEST="true")
    assert finished["HX-Refresh"] == "true"


def test_a_parsed_trace_page_shows_its_artifacts_table(logged_in, infra, alice, no_worker, corpus_dir):
    from ingest.uploads import create_trace
    folder = corpus("h200", "cudagraph_abort")
    trace = create_trace(infra, alice, [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted(folder.iterdir())])
    parse_trace(trace.pk)
    body = logged_in.get(f"/traces/{trace.pk}/").content.decode()
    assert 'id="artifacts"' in body and "kineto" in body and "expected a trace, log or dump; got an empty file" in body


def test_a_failed_trace_page_says_why(logged_in, infra):
    trace = Trace.objects.create(team=infra, name="t")
    trace.transition("parsing")
    trace.transition("failed", error="junk.bin: byte 0: expected a known trace format; got binary data")
    body = logged_in.get(f"/traces/{trace.pk}/").content.decode()
    assert "Why it failed" in body and "junk.bin: byte 0" in body and "every 1s" not in body


def test_cluster_status_and_assignee_change_through_htmx(logged_in, infra, bob):
    cluster = ClusterRecord.objects.create(team=infra, fingerprint="f", title="OOM", severity="critical")
    response = logged_in.post(f"/clusters/{cluster.pk}/triage/",
                              {f"c{cluster.pk}-status": "ignored", f"c{cluster.pk}-assignee": bob.pk},
                              HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert f'id="cluster-row-{cluster.pk}"' in response.content.decode()
    cluster.refresh_from_db()
    assert (cluster.status, cluster.assignee) == ("ignored", bob)
