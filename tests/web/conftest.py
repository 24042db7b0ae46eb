"""Personas (healthchecks style): alice owns team `infra`, bob is her team mate, charlie
is in another team (`other`), so every test can check cross-team denial."""
from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from accounts.models import Team
from tests.web.stack import ROOT

CHROMIUM = Path("/usr/bin/chromium")  # Debian's; never a downloaded browser
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SHOTS = ROOT / "test-artifacts" / "browser"


@pytest.fixture(autouse=True)
def storage(settings, tmp_path):
    """Every test gets its own artifact store."""
    settings.TRACEDOC_STORAGE = tmp_path / "storage"
    return settings.TRACEDOC_STORAGE


@pytest.fixture
def infra(db):
    return Team.objects.create(name="Infra", slug="infra")


@pytest.fixture
def other(db):
    return Team.objects.create(name="Other", slug="other")


def _member(username: str, team: Team) -> User:
    user = User.objects.create_user(username, password=f"{username}-pw-123")
    team.members.add(user)
    return user


@pytest.fixture
def alice(infra):
    return _member("alice", infra)


@pytest.fixture
def bob(infra):
    return _member("bob", infra)


@pytest.fixture
def charlie(other):
    return _member("charlie", other)


def token_client(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def alice_api(alice):
    return token_client(alice)


@pytest.fixture
def charlie_api(charlie):
    return token_client(charlie)


@pytest.fixture
def no_worker(monkeypatch):
    """Record the traces queued for parsing instead of sending them to a broker."""
    queued = []
    monkeypatch.setattr("ingest.tasks.parse_trace.delay", queued.append)
    monkeypatch.setattr("diagnosis.tasks.diagnose_trace.delay", queued.append)
    return queued


@pytest.fixture
def browser():
    """Headless Chromium driven by Playwright (browser tests skip without it)."""
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (scripts/ensure-chromium.sh)")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()
