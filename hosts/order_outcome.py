"""What a closed-loop order changed, read from its `before` and `after` (hosts.closed_loop):
the finding that asked, and what the capture's diagnosis says now, for the cluster page.

    latency.jitter (undetermined) -> latency.spike-host-work: 4 of the 15 profiled steps ...
"""
from __future__ import annotations

from dataclasses import dataclass

from hosts.models import CaptureRequest


@dataclass(frozen=True)
class Asked:
    """The finding that asked for the capture, in the trace it came from."""
    rule_id: str
    title: str
    trace_id: int | None
    finding: str  # its id inside that trace's report ("F2")


@dataclass(frozen=True)
class Answer:
    """A finding of the capture's diagnosis that the asking trace did not have."""
    rule_id: str
    title: str
    explanation: str
    finding: str


@dataclass(frozen=True)
class Outcome:
    asked: Asked
    verdict: str  # waiting | diagnosing | decided | open | nothing new | no capture
    answer: Answer | None = None
    trace_id: int | None = None  # the capture's trace

    @property
    def decided(self) -> bool:
        return self.verdict == "decided"


def outcome_of(order: CaptureRequest) -> Outcome:
    before = order.before or {}
    asked = Asked(rule_id=before.get("rule_id", order.rule_id), title=before.get("title", ""),
                  trace_id=order.source_trace_id, finding=before.get("finding", ""))
    if order.state in CaptureRequest.OUTSTANDING:
        return Outcome(asked, "waiting")
    if order.state != CaptureRequest.State.DONE:
        return Outcome(asked, "no capture")
    after = order.after or {}
    if not after:
        return Outcome(asked, "diagnosing", trace_id=order.trace_id)  # the capture's report is not stored yet
    found = after.get("findings") or []
    # the finding that now explains the one that asked, else the first new one
    lead = next((f for f in found if f.get("finding") == after.get("explained_by")), found[0] if found else None)
    answer = Answer(lead["rule_id"], lead.get("title", ""), lead.get("explanation", ""),
                    lead.get("finding", "")) if lead else None
    # not decided with new findings: the asking finding is still there with its question open
    verdict = "decided" if after.get("decided") else ("open" if answer else "nothing new")
    return Outcome(asked, verdict, answer, after.get("trace", order.trace_id))
