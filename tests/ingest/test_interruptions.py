"""A registered interruption (a worker's time limit) passes the guards that keep one bad file,
rule or SLI from sinking the rest; any other exception stays contained in its file's result."""
from pathlib import Path

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from ingest.engine import interruptions
from ingest.engine.artifact_results import parse_one
from ingest.engine.parsers.logs import parser as log_parser


@pytest.fixture
def crashing_log_parser(monkeypatch):
    def crash_with(exc: BaseException):
        def parse(path, sink, report, **kwargs):
            raise exc
        monkeypatch.setattr(log_parser, "parse", parse)
    return crash_with


def a_log(tmp_path: Path) -> Path:
    path = tmp_path / "serving.log"
    path.write_text("2024-11-29 08:19:30,038 INFO worker.py:120 ready\n")
    return path


def test_the_time_limit_reaches_the_task(tmp_path, crashing_log_parser):
    assert SoftTimeLimitExceeded in interruptions._KINDS  # tracedoc.celery registers it
    crashing_log_parser(SoftTimeLimitExceeded())
    with pytest.raises(SoftTimeLimitExceeded):
        parse_one("serving.log", a_log(tmp_path), tmp_path)


def test_any_other_crash_stays_the_files_internal_error(tmp_path, crashing_log_parser):
    crashing_log_parser(KeyError("boom"))
    result = parse_one("serving.log", a_log(tmp_path), tmp_path)
    assert result.internal_error and "KeyError" in result.error and "serving.log" in result.error
