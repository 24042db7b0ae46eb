"""The service tests' fixtures (tests/support/fixtures.py): personas, API clients, a storage
folder per test, Celery workers, the browser. And what the slim-client tests (the distribution
test and the docs/ci.md examples) share: the slim `tracedoc-client` wheel (clients/python/) built
offline and installed with its one dependency (msgspec) into a fresh virtual environment, as a CI
job installs it, and the
running tracedoc it talks to (gunicorn + a Celery worker on PostgreSQL and Redis)."""
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixtures import *  # noqa: F401,F403
from tests.support.slim_client import wheel_of_installed
from tests.support.stack import ROOT, running_stack


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory) -> Path:
    """A fresh venv holding the built wheel and msgspec alone; its bin/ folder."""
    tmp = tmp_path_factory.mktemp("client")
    built = subprocess.run([sys.executable, str(ROOT / "clients" / "python" / "build_wheel.py"), "--out",
                            str(tmp / "dist")], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    wheel = Path(built.stdout.strip())
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    wheel_of_installed("msgspec", tmp / "dist")  # its one dependency, offline
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-index",
                    "--find-links", str(tmp / "dist"), str(wheel)], check=True, timeout=300)
    return venv / "bin"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("stack")) as s:  # skips without PostgreSQL and Redis
        yield s
