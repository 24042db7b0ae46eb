"""Backtest a candidate rule version over a team's newest finished traces, in the request,
within a time budget: the traces left when the budget runs out are listed as not run rather
than making the request wait (each trace is a full diagnosis, twice)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from diagnosis.backtest import ReportDelta, backtest_events, with_candidate
from diagnosis.models import SLODefinition
from diagnosis.pipeline import load_events
from diagnosis.tasks import artifact_results, rules_for
from ingest.models import Trace

DEFAULT_TRACES = 10
MAX_TRACES = 50
BUDGET_S = 20.0


@dataclass(frozen=True)
class TraceOutcome:
    trace_id: int
    name: str
    delta: ReportDelta | None = None
    error: str = ""

    def to_dict(self) -> dict:
        return {"trace": self.trace_id, "name": self.name, "error": self.error,
                **(self.delta.to_dict() if self.delta else {})}


@dataclass(frozen=True)
class Backtest:
    rule_id: str
    version: int
    outcomes: tuple[TraceOutcome, ...] = ()
    not_run: tuple[int, ...] = field(default=())  # traces the time budget left out

    def to_dict(self) -> dict:
        return {"rule_id": self.rule_id, "version": self.version, "traces": [o.to_dict() for o in self.outcomes],
                "not_run": list(self.not_run),
                "changed": sum(1 for o in self.outcomes if o.delta and o.delta.changed)}


def recent_traces(team, count: int) -> list[Trace]:
    return list(Trace.objects.filter(team=team, state=Trace.State.DONE).defer("report")[:count])


def backtest_rule(team, candidate, count: int = DEFAULT_TRACES, budget_s: float = BUDGET_S) -> Backtest:
    """`candidate` (a loader rule) against the team's current pack on its last `count` traces."""
    current = rules_for(team)
    candidate_pack = with_candidate(current, candidate)
    slos = SLODefinition.objects.effective_for(team)
    deadline = time.monotonic() + budget_s
    traces = recent_traces(team, min(max(count, 1), MAX_TRACES))
    outcomes = []
    for n, trace in enumerate(traces):
        if time.monotonic() > deadline:
            return Backtest(candidate.id, int(candidate.version), tuple(outcomes), tuple(t.pk for t in traces[n:]))
        artifacts = artifact_results(trace)
        try:
            events, _ = load_events(artifacts, trace.clock_offsets or None)
        except (OSError, ValueError) as e:  # a stored file gone or unreadable: that trace only
            outcomes.append(TraceOutcome(trace.pk, str(trace), error=f"{type(e).__name__}: {e}"))
            continue
        outcomes.append(TraceOutcome(trace.pk, str(trace),
                                     delta=backtest_events(artifacts, events, current, candidate_pack, slos)))
    return Backtest(candidate.id, int(candidate.version), tuple(outcomes))
