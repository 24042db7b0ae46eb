"""The trace page's "Compare with…" (issue 32): it preselected the newest trace of the team,
however unrelated; now the most alike one (the same name or labels, the previous run first),
or none, which the select then asks for."""
from datetime import timedelta

from django.utils import timezone

from diagnosis.diff_page import compare_candidates
from ingest.models import Trace


def done(team, name: str, labels: dict, hours_ago: float) -> Trace:
    trace = Trace.objects.create(team=team, name=name, labels=labels, state=Trace.State.DONE)
    Trace.objects.filter(pk=trace.pk).update(created_at=timezone.now() - timedelta(hours=hours_ago))
    trace.refresh_from_db()
    return trace


def test_the_previous_run_of_the_same_job_is_preselected_not_the_newest_trace(infra, other):
    job = {"host": "gpu-a", "job": "llama-decode", "capture": "wrap"}
    earlier = done(infra, "gpu-a: python decode.py (exit 0)", {**job, "exit_code": "0"}, hours_ago=30)
    previous = done(infra, "gpu-a: python decode.py (exit 0)", {**job, "exit_code": "0"}, hours_ago=20)
    this = done(infra, "gpu-a: python decode.py (exit 3)", {**job, "exit_code": "3"}, hours_ago=10)
    later = done(infra, "gpu-a: python decode.py (exit 0)", {**job, "exit_code": "0"}, hours_ago=5)
    same_host = done(infra, "gpu-a: python train.py (exit 0)", {"host": "gpu-a", "capture": "wrap"}, hours_ago=2)
    unrelated = done(infra, "bert nightly", {"env": "ci"}, hours_ago=1)  # the newest
    done(other, "gpu-a: python decode.py (exit 0)", job, hours_ago=15)  # another team's
    choices = compare_candidates(this)
    assert choices.preselected == previous
    assert choices.similar == [previous, earlier, later, same_host]
    assert choices.others == [unrelated]


def test_nothing_alike_preselects_nothing(infra):
    this = done(infra, "resnet capture", {"host": "gpu-b"}, hours_ago=3)
    same_host_only = done(infra, "bert nightly", {"host": "gpu-b"}, hours_ago=2)
    done(infra, "vllm bench", {"env": "ci"}, hours_ago=1)
    choices = compare_candidates(this)
    assert choices.preselected is None and choices.similar == [same_host_only]


def test_the_trace_it_adds_to_is_alike(infra):
    first = done(infra, "rank 0", {}, hours_ago=3)
    this = done(infra, "rank 1", {}, hours_ago=1)
    Trace.objects.filter(pk=this.pk).update(adds_to=first)
    this.refresh_from_db()
    assert compare_candidates(this).preselected == first
