"""Backtest a rule's edited text over a team's newest finished traces, within a time budget
(the editor's runs on a worker, diagnosis.rule_trial_runs; the API's in the request): the
traces left when the budget runs out are listed as not run rather than making the caller
wait (each trace is a full diagnosis, two or three times). The rules it is compared against
are the team's as they were, without any version of the rule (a builtin of the same id
stays); a saved version, when there is one, is compared too."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from diagnosis.engine.backtest import TraceBacktest, backtest_trace
from diagnosis.models import SLODefinition
from diagnosis.engine.pipeline import load_events
from diagnosis.tasks import missing_files, stored_inputs
from ingest.models import Trace
from rules.engine.loader import load_rule_dirs
from rules.models import TeamRule

DEFAULT_TRACES = 10
MAX_TRACES = 50
BUDGET_S = 20.0


@dataclass(frozen=True)
class TraceOutcome:
    trace_id: int
    name: str
    delta: TraceBacktest | None = None
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
    saved_version: int | None = None  # the saved version compared too (None: a new rule)

    def to_dict(self) -> dict:
        return {"rule_id": self.rule_id, "version": self.version, "saved_version": self.saved_version,
                "traces": [o.to_dict() for o in self.outcomes], "not_run": list(self.not_run),
                "changed": sum(1 for o in self.outcomes if o.delta and o.delta.changed)}


def recent_traces(team, count: int) -> list[Trace]:
    return list(Trace.objects.filter(team=team, state=Trace.State.DONE).defer("report")[:count])


def rules_without(team, rule_id: str) -> list:
    """The team's rules as they were before `rule_id` was written: the builtin pack with the
    team's enabled rules, leaving out the team's rule of that id (its builtin, if any, stays)."""
    merged = {r.id: r for r in load_rule_dirs(None)}
    merged.update((r.id, r) for r in TeamRule.objects.loaded_for(team) if r.id != rule_id)
    return list(merged.values())


def backtest_rule(team, candidate, count: int = DEFAULT_TRACES, budget_s: float = BUDGET_S,
                  saved=None) -> Backtest:
    """`candidate` (a loader rule: the editor's text, saved or not) against the team's rules
    as they were on its last `count` traces; `saved`: the saved version (a loader rule), if any."""
    baseline = rules_without(team, candidate.id)
    slos = SLODefinition.objects.effective_for(team)
    saved_version = int(saved.version) if saved is not None else None
    deadline = time.monotonic() + budget_s
    traces = recent_traces(team, min(max(count, 1), MAX_TRACES))
    outcomes = []
    for n, trace in enumerate(traces):
        if time.monotonic() > deadline:
            return Backtest(candidate.id, int(candidate.version), tuple(outcomes), tuple(t.pk for t in traces[n:]),
                            saved_version)
        artifacts, offsets = stored_inputs(trace)  # a closed-loop capture's with those it adds to (before/)
        if gone := missing_files(artifacts):
            outcomes.append(TraceOutcome(trace.pk, str(trace), error=f"stored events gone: {', '.join(gone)}"))
            continue
        try:
            events, _ = load_events(artifacts, offsets or None)
        except (OSError, ValueError) as e:  # a stored file gone or unreadable: that trace only
            outcomes.append(TraceOutcome(trace.pk, str(trace), error=f"{type(e).__name__}: {e}"))
            continue
        outcomes.append(TraceOutcome(trace.pk, str(trace),
                                     delta=backtest_trace(artifacts, events, baseline, candidate, saved, slos)))
    return Backtest(candidate.id, int(candidate.version), tuple(outcomes), saved_version=saved_version)
