"""Progress that means something: the bar follows the bytes read while parsing, then the
diagnosis stages; the page's heading badge and the progress card say the same state."""
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from diagnosis.tasks import diagnose_trace
from ingest import tasks as ingest_tasks
from ingest.models import Trace
from ingest.engine.parsers.kineto import decode as kineto_decode
from ingest.engine.progress import DIAGNOSIS_STAGES
from ingest.tasks import parse_trace
from ingest.uploads import create_trace
from tests.corpus import corpus


@pytest.fixture
def logged_in(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def record_calls(monkeypatch):
    """Every progress write, in order: record_progress and the best-effort beats from inside a
    parse (the real write still runs)."""
    calls = []
    original = Trace._write_progress

    def record(self, counters):
        calls.append(dict(counters))
        original(self, counters)
    monkeypatch.setattr(Trace, "_write_progress", record)
    return calls


def upload(team, user, path):
    return create_trace(team, user, [SimpleUploadedFile(path.name, path.read_bytes())])


def test_the_percent_follows_bytes_then_the_diagnosis(infra):
    trace = Trace.objects.create(team=infra, name="t", bytes_total=1000)
    assert trace.progress_percent == 0
    trace.transition("parsing")
    trace.record_progress(bytes_done=500)
    assert trace.progress_percent == 35  # half the bytes of the parse's 70%
    trace.transition("parsed")
    assert trace.progress_percent == 70
    trace.transition("diagnosing")
    trace.record_progress(stage="rules", diagnosis_done=0.5)
    assert trace.progress_percent == 85
    trace.transition("done")
    assert trace.progress_percent == 100


def test_parsing_reports_bytes_as_it_reads(infra, alice, no_worker, record_calls, monkeypatch, corpus_dir):
    monkeypatch.setattr(ingest_tasks, "PROGRESS_EVERY_S", 0.0)
    # windows of 64 KiB: ~200 of them; the reading thread is at most two ahead of the rows built
    monkeypatch.setattr(kineto_decode, "WINDOW_BYTES", 64 << 10)
    path = corpus("h200", "healthy_decode", "kineto_trace.json.gz")  # 1.4 MB: more than one read
    trace = upload(infra, alice, path)
    parse_trace(trace.pk)
    done = [c["bytes_done"] for c in record_calls if "bytes_done" in c and "events_done" in c]
    assert any(0 < b < path.stat().st_size for b in done)  # the bar moved before the end
    assert done == sorted(done) and done[-1] == path.stat().st_size
    assert record_calls[0]["stage"] == "parsing"


def test_the_diagnosis_reports_its_stages(infra, alice, no_worker, record_calls, corpus_dir):
    trace = upload(infra, alice, corpus("h200", "cudagraph_abort", "kineto_trace.json.gz"))
    parse_trace(trace.pk)
    del record_calls[:]
    diagnose_trace(trace.pk)
    stages = [c["stage"] for c in record_calls if "stage" in c]
    assert list(dict.fromkeys(stages)) == list(DIAGNOSIS_STAGES) + ["done"]
    trace.refresh_from_db()
    assert (trace.state, trace.stage, trace.progress_percent) == ("done", "done", 100)


def test_the_api_says_the_stage(alice_api, infra):
    trace = Trace.objects.create(team=infra, name="t", bytes_total=10)
    trace.transition("parsing")
    trace.record_progress(stage="parsing", bytes_done=5)
    progress = alice_api.get(f"/api/v1/traces/{trace.pk}/").json()["progress"]
    assert (progress["stage"], progress["percent"], progress["bytes_done"]) == ("parsing", 35, 5)


def test_the_heading_badge_follows_the_polled_card(logged_in, infra):
    trace = Trace.objects.create(team=infra, name="t")
    page = logged_in.get(f"/traces/{trace.pk}/").content.decode()
    assert '<span id="trace-state" class="state state-received">received</span>' in page
    trace.transition("parsing")
    partial = logged_in.get(f"/traces/{trace.pk}/progress/", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="trace-state" hx-swap-oob="true" class="state state-parsing">parsing<' in partial
    assert '<strong class="state state-parsing">parsing</strong>' in partial  # the card says the same
