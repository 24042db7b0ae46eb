"""The one failure ladder of the trace tasks (ingest.task_failures): a time limit, running out
of memory and any other error each fail the trace once with a message that says what to do; a
lost database connection goes up so that Celery retries the task."""
import logging

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.db import OperationalError

from ingest.task_failures import failures

log = logging.getLogger("tests.task_failures")


def run(error: BaseException | None, **extra):
    errors = []
    with failures(errors.append, log, "task 7 failed", doing="parsing x.log", advice="raise the limit",
                  internal="internal error while parsing x.log", **extra) as outcome:
        if error is not None:
            raise error
    return outcome.failed, errors


def test_work_that_succeeds_fails_nothing():
    assert run(None) == (False, [])


def test_the_time_limit_names_the_setting_and_the_advice():
    assert run(SoftTimeLimitExceeded()) == (True, [
        "parsing x.log took longer than the worker's time limit (TRACEDOC_TASK_SOFT_TIME_LIMIT); raise the limit"])


def test_any_other_error_is_logged_and_named(caplog):
    with caplog.at_level(logging.ERROR, logger="tests.task_failures"):
        failed, errors = run(KeyError("ts"))
    assert failed and errors == ["internal error while parsing x.log (KeyError: 'ts'); the worker log has the details"]
    assert caplog.records[0].getMessage() == "task 7 failed" and caplog.records[0].exc_info


def test_out_of_memory_says_so_where_the_task_does():
    assert run(MemoryError(), out_of_memory="out of memory: raise TRACEDOC_TASK_MEMORY_LIMIT_MB") == (
        True, ["out of memory: raise TRACEDOC_TASK_MEMORY_LIMIT_MB"])
    assert run(MemoryError())[1] == ["internal error while parsing x.log (MemoryError: ); the worker log has the details"]


def test_a_lost_database_connection_goes_up_for_the_retry():
    with pytest.raises(OperationalError):
        run(OperationalError("server closed the connection unexpectedly"))
