"""Worker tasks outlive a dropped PostgreSQL connection (a restart, a failover, an idle
connection killed by a proxy or `pg_terminate_backend`).

Two levels, so a blip never fails a trace and never leaves it stuck:
- a single write outside a transaction (progress, a state transition) reconnects and tries
  again for up to ~15 s (`retrying`): a parse goes on across a database restart;
- a progress beat from inside a parser is only tried (`best_effort`): the parse goes on, the
  next beat writes the counters;
- a task whose work hit a lost connection anyway does not record it as the trace's failure
  (it is not the trace's fault): it lets the error up (ingest.task_failures, the tasks'
  one failure ladder, re-raises LOST before its catch-all) and Celery retries the task as a whole (`RETRY`), which its idempotence allows.
  Past the retries the message is dropped and the beat job `reconcile_traces` re-queues the
  trace once its heartbeat is stale.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, TypeVar

from django.db import InterfaceError, OperationalError, connection

log = logging.getLogger(__name__)
T = TypeVar("T")

# What Django raises when the server went away: psycopg's OperationalError (terminated,
# server closed the connection, could not connect) and InterfaceError (already closed).
LOST = (OperationalError, InterfaceError)
WAITS_S = (0.5, 1.0, 2.0, 4.0, 8.0)
# Celery options of a task that retries as a whole on a lost connection: 5 tries, 2-32 s apart.
RETRY = {"autoretry_for": LOST, "max_retries": 5, "retry_backoff": 2, "retry_backoff_max": 32,
         "retry_jitter": False}


def retrying(write: Callable[[], T], what: str) -> T:
    """`write()`; when the connection was lost, reconnect and try again a few times. Inside a
    transaction nothing is retried here: the transaction is lost with the connection, so the
    error goes up to whoever opened it."""
    for wait in (*WAITS_S, None):
        try:
            return write()
        except LOST as e:
            if wait is None or connection.in_atomic_block:
                raise
            log.warning("%s: database connection lost (%s); reconnecting in %.1f s", what, _first_line(e), wait)
            connection.close()  # a broken connection is not reused (a pool discards it)
            time.sleep(wait)
    raise AssertionError("unreachable")


def best_effort(write: Callable[[], object], what: str) -> None:
    """`write()` once; a lost connection is logged and closed (the next call reconnects)."""
    try:
        write()
    except LOST as e:
        if connection.in_atomic_block:
            raise
        log.warning("%s: database connection lost (%s); skipped", what, _first_line(e))
        connection.close()


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
