"""The service tests' fixtures (tests/support/fixtures.py), and `parse`: one corpus file through
the pipeline's parse step (tests/ingest/parsers/helpers.py `parse_result`)."""
from pathlib import Path

import pytest

from tests.ingest.parsers.helpers import parse_result
from tests.support.fixtures import *  # noqa: F401,F403  (the service tests' fixtures)


@pytest.fixture
def parse(tmp_path, corpus_dir):
    return lambda path, name=None: parse_result(Path(path), tmp_path, name)
