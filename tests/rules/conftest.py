"""The service tests' fixtures (tests/support/fixtures.py): personas, API clients, a storage
folder per test, Celery workers, the browser. And what the rule pages' tests share: a logged-in
client, the team's rule, a finished trace to test rules against."""
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from diagnosis.tasks import diagnose_trace
from ingest.tasks import parse_trace
from ingest.uploads import create_trace
from rules.models import TeamRule
from tests.corpus import corpus
from tests.support.fixtures import *  # noqa: F401,F403
from tests.support.rule_trials import trial_worker, trials  # noqa: F401
from tests.support.rule_texts import GRAPH_LAUNCHES


@pytest.fixture
def logged_in(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def ours(infra, alice):
    return TeamRule.objects.create(team=infra, yaml=GRAPH_LAUNCHES, created_by=alice, updated_by=alice)


@pytest.fixture
def graph_trace(infra, alice, no_worker, corpus_dir):
    """The cudagraph_abort Kineto trace, parsed and diagnosed (its parquet exists)."""
    kineto = corpus("h200", "cudagraph_abort", "kineto_trace.json.gz")
    trace = create_trace(infra, alice, [SimpleUploadedFile(kineto.name, kineto.read_bytes())])
    parse_trace(trace.pk)
    diagnose_trace(trace.pk)
    trace.refresh_from_db()
    assert trace.state == "done", trace.error
    return trace
