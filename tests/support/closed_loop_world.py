"""A team's closed loop with real reports (tests/fixtures/closed_loop/spiky_gpu, the H100 capture):
the job's per-step latency says latency.jitter and asks for a profiler window at the next slow
step; the team opted the rule in, so the stored report ordered it from gpu-7's agent; the
capture came back (the kept profiler window) and its diagnosis, with the first run's files,
names `save_checkpoint` as 100% of the slow steps' extra time. A second host, gpu-8, has an
order still queued, and a person asked gpu-7 for a capture on the host page."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from diagnosis.models import ClusterRecord, FindingRecord, record_report
from diagnosis.engine.pipeline import run
from hosts.models import CapturePolicy, CaptureRequest, Host
from ingest.models import Trace
from tests.corpus import ROOT

SPIKY = ROOT / "tests" / "fixtures" / "closed_loop" / "spiky_gpu"


@dataclass(frozen=True)
class Reports:
    asking: object    # latency.jitter, with its capture plan
    answered: object  # with the profiler window: latency.spike-host-work


def reports() -> Reports:
    return Reports(run([SPIKY / "token_latency.jsonl"]),
                   run([SPIKY / "token_latency.jsonl", SPIKY / "profiler_trace.json.gz"]))


@dataclass(frozen=True)
class World:
    first: Trace        # the trace whose finding asked
    capture: Trace      # the capture's trace, diagnosed with the first one's files
    cluster: ClusterRecord
    done: CaptureRequest
    queued: CaptureRequest
    by_person: CaptureRequest


def stored(team, user, report, **labels) -> Trace:
    trace = Trace.objects.create(team=team, created_by=user, labels=labels, state="done", report=report.to_dict())
    record_report(trace, report)  # the receiver runs the closed loop, as after a diagnosis
    return trace


def asking_cluster(team, user, reports: Reports) -> ClusterRecord:
    """gpu-7's agent and the cluster of its trace's latency.jitter finding, the loop still off."""
    Host.objects.create(team=team, name="gpu-7", last_seen=timezone.now())
    trace = stored(team, user, reports.asking, host="gpu-7")
    return FindingRecord.objects.get(trace=trace, rule_id="latency.jitter").cluster


def closed_loop_world(team, user, reports: Reports, policy_on: bool = True) -> World:
    now = timezone.now()
    for name in ("gpu-7", "gpu-8"):
        Host.objects.create(team=team, name=name, agent_version="1.2.3", last_seen=now)
    CapturePolicy.objects.create(team=team, enabled=policy_on, rules=["latency.jitter"] if policy_on else [])
    first = stored(team, user, reports.asking, host="gpu-7")
    cluster = FindingRecord.objects.get(trace=first, rule_id="latency.jitter").cluster
    if policy_on:
        done = CaptureRequest.objects.get(host__name="gpu-7", origin="auto")
    else:  # the loop was on when it ordered
        done = CaptureRequest.objects.create(
            team=team, host=Host.objects.get(team=team, name="gpu-7"), kind="profiler", steps=30, trigger="slow_step",
            plan=FindingRecord.objects.get(trace=first, rule_id="latency.jitter").capture, origin="auto",
            cluster=cluster, rule_id="latency.jitter", source_trace=first,
            before={"trace": first.pk, "finding": "F2", "rule_id": "latency.jitter"})
    capture = Trace.objects.create(team=team, created_by=user, adds_to=first, state="done",
                                   labels={"host": "gpu-7", "capture_request": str(done.pk)},
                                   report=reports.answered.to_dict())
    done.finish(capture)
    record_report(capture, reports.answered)  # record_outcome keeps before -> after on the order
    done.refresh_from_db()
    queued = CaptureRequest.objects.create(
        team=team, host=Host.objects.get(team=team, name="gpu-8"), kind="profiler", steps=30, trigger="slow_step",
        plan=done.plan, origin="auto", cluster=cluster, rule_id="latency.jitter", source_trace=first,
        before=done.before, expires_at=now + timedelta(hours=20))
    by_person = Host.objects.get(team=team, name="gpu-7").ask("flight_recorder", 20, user)
    return World(first, capture, cluster, done, queued, by_person)
