"""How a trace task ends when its work fails: one ladder for parse_trace, parse_part,
merge_parts (ingest.tasks) and diagnose_trace (diagnosis.tasks).

- past the worker's soft time limit: the trace fails, naming the limit and what to change;
- out of memory (where the task says what that means for it): the trace fails, the worker serves on;
- a lost database connection is not the trace's fault: it goes up and Celery retries the task
  as a whole (ingest.db_outage.RETRY);
- anything else is logged with its traceback and the trace fails with the error's type and text.

    with failures(partial(_fail, trace), log, f"parse_trace {trace.pk} failed", doing="parsing",
                  advice="raise the limit", internal="internal error while parsing") as outcome:
        ...work...
    if outcome.failed:
        return
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from celery.exceptions import SoftTimeLimitExceeded

from ingest import db_outage


@dataclass
class Outcome:
    failed: bool = False


@contextmanager
def failures(fail: Callable[[str], None], log: logging.Logger, log_as: str, *, doing: str, advice: str,
             internal: str, out_of_memory: str = "") -> Iterator[Outcome]:
    """Run the block; a failure of it calls `fail(error)` once and sets `outcome.failed`.
    `doing`: what took too long ("parsing x.log"); `advice`: what to change then; `internal`:
    the error's prefix for anything else; `out_of_memory`: the error for a MemoryError (without
    it a MemoryError is an internal error like any other)."""
    outcome = Outcome()
    try:
        yield outcome
    except SoftTimeLimitExceeded:
        outcome.failed = True
        fail(f"{doing} took longer than the worker's time limit (TRACEDOC_TASK_SOFT_TIME_LIMIT); {advice}")
    except db_outage.LOST:
        raise  # not the trace's fault: the task is retried (db_outage.RETRY)
    except MemoryError as e:  # past the pool child's cap (tracedoc.celery): the worker serves on
        outcome.failed = True
        log.exception("%s: out of memory", log_as)
        fail(out_of_memory or f"{internal} ({type(e).__name__}: {e}); the worker log has the details")
    except Exception as e:
        outcome.failed = True
        log.exception("%s", log_as)
        fail(f"{internal} ({type(e).__name__}: {e}); the worker log has the details")
