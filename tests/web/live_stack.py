"""A live tracedoc for tests that talk HTTP as a CI job would: pytest-django's live server,
the Celery worker subprocess of the browser tests on the same database, and a token."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from accounts.models import ApiToken
from tests.web.conftest import fresh_connections
from tests.web.test_browser import worker  # noqa: F401  (the fixture, shared with the browser tests)


@dataclass(frozen=True)
class LiveTracedoc:
    url: str
    token: str


@pytest.fixture
def live_tracedoc(live_server, worker, alice):  # noqa: F811
    # publish to this test's broker: pools kept from an earlier test's broker would swallow the task
    fresh_connections()
    yield LiveTracedoc(url=live_server.url, token=ApiToken.issue(alice)[1])
    fresh_connections()
