"""The service tests' fixtures (tests/support/fixtures.py): personas, API clients, a storage
folder per test, Celery workers, the browser."""
from tests.support.fixtures import *  # noqa: F401,F403
