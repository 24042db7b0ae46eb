"""A live tracedoc for tests that talk HTTP as a CI job would: pytest-django's live server,
the Celery worker subprocess of the browser tests on the same database, and a token."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from accounts.models import ApiToken
from tests.support.fixtures import fresh_connections
from tests.support.fixtures import worker  # noqa: F401  (a Celery worker subprocess on the test's database)


@dataclass(frozen=True)
class LiveTracedoc:
    url: str
    token: str


@pytest.fixture
def live_tracedoc(live_server, worker, alice, settings):  # noqa: F811
    # these tests read the 201-with-report answer of a diagnosis that may take longer than the
    # default cap of ?wait= (10 s) on this 2-core machine; an operator may raise it the same way
    settings.TRACEDOC_MAX_WAIT_SECONDS = 120
    # publish to this test's broker: pools kept from an earlier test's broker would swallow the task
    fresh_connections()
    yield LiveTracedoc(url=live_server.url, token=ApiToken.issue(alice)[1])
    fresh_connections()
