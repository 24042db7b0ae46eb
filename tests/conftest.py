"""Fixtures the tests of several packages share. The Django and Celery imports are made inside
the fixtures: the tests that need no server (agent, CLI) load this file too."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.corpus import CORPUS


@pytest.fixture(scope="session")
def corpus_dir():
    if not CORPUS.is_dir():
        pytest.skip("shared corpus not found beside the project")
    return CORPUS


@pytest.fixture
def decode_trace(infra, alice, no_worker, corpus_dir):
    """h200/fragmented_decode, parsed and diagnosed in this process."""
    from tests.support.diagnosed_traces import diagnosed
    return diagnosed(infra, alice, "fragmented_decode")


@pytest.fixture
def dead_broker():
    """Point Celery at a port nothing listens on (a real connection attempt, refused)."""
    from tests.support.fixtures import fresh_connections
    from tracedoc.celery import app
    # the Django-namespaced key, as the settings set it: a plain `broker_url` would shadow
    # it for every later test that points Celery at a broker of its own
    old = app.conf.broker_url
    app.conf.update(CELERY_BROKER_URL="redis://127.0.0.1:9/0")
    fresh_connections()
    yield
    app.conf.update(CELERY_BROKER_URL=old)
    fresh_connections()


@dataclass(frozen=True)
class LiveTracedoc:
    url: str
    token: str


@pytest.fixture
def live_tracedoc(live_server, worker, alice, settings):
    """A live tracedoc for tests that talk HTTP as a CI job would: pytest-django's live server,
    the Celery worker subprocess of the browser tests on the same database, and a token."""
    from accounts.models import ApiToken
    from tests.support.fixtures import fresh_connections
    # these tests read the 201-with-report answer of a diagnosis that may take longer than the
    # default cap of ?wait= (10 s) on this 2-core machine; an operator may raise it the same way
    settings.TRACEDOC_MAX_WAIT_SECONDS = 120
    # publish to this test's broker: pools kept from an earlier test's broker would swallow the task
    fresh_connections()
    yield LiveTracedoc(url=live_server.url, token=ApiToken.issue(alice)[1])
    fresh_connections()
