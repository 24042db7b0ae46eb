"""The service tests' fixtures (tests/support/fixtures.py): personas, API clients, a storage
folder per test, Celery workers, the browser; and the closed loop's world on real reports."""
import pytest
from django.test import Client

from tests.support.closed_loop_world import closed_loop_world, reports
from tests.support.fixtures import *  # noqa: F401,F403


@pytest.fixture(scope="module")
def spiky():
    """The H100 capture's two reports (tests/support/closed_loop_world.py), once a module."""
    return reports()


@pytest.fixture
def world(infra, alice, spiky):
    return closed_loop_world(infra, alice, spiky)


@pytest.fixture
def alice_client(alice):
    """A browser session of alice's (the pages, not the API)."""
    client = Client()
    client.force_login(alice)
    return client
