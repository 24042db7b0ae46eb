"""Exceptions about the run, not about its input: a worker's time limit (Celery's
SoftTimeLimitExceeded, which the tasks register; the engine imports no Celery).

Every guard that keeps one bad file, rule, feature or SLI from sinking the rest lets these
through to the task that set the limit, which fails the trace with what happened: otherwise a
time limit hit inside a parser reads "internal error in the log parser ... a tracedoc bug", or
a rule's error in the report, and the work goes on past its limit."""
from __future__ import annotations

_KINDS: tuple[type[BaseException], ...] = ()


def register(*kinds: type[BaseException]) -> None:
    global _KINDS
    _KINDS = tuple(dict.fromkeys(_KINDS + kinds))


def reraise(exc: BaseException) -> None:
    """In a guard's `except Exception as e:`, first: raise `e` again if it is an interruption."""
    if isinstance(exc, _KINDS):
        raise exc
