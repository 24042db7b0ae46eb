"""The cluster page's activity log: every change with who and when (status, assignee,
snooze, comment) and the rule versions that matched, each at the first trace it matched in;
a newer rule version (as after a rule change and a re-diagnosis) adds its own line."""
import re
from datetime import timedelta

import msgspec
from django.utils import timezone

from diagnosis.cluster_activity import activity_log
from diagnosis.models import ClusterRecord, record_report
from ingest.models import Trace
from tests.support.cluster_world import NCCL, days_ago, report, seen


def seen_with_version(team, cause, version: int, at):
    """A trace whose finding came from `version` of the rule."""
    base = report(cause)
    bumped = msgspec.structs.replace(base, findings=tuple(msgspec.structs.replace(f, rule_version=version)
                                                          for f in base.findings))
    trace = Trace.objects.create(team=team, name=f"trace v{version}", state=Trace.State.DONE)
    Trace.objects.filter(pk=trace.pk).update(created_at=at)
    trace.refresh_from_db()
    record_report(trace, bumped)
    return trace


def activity_items(page: str) -> list[str]:
    block = page.split('<ul class="activity">', 1)[1].split("</ul>", 1)[0]
    return [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", li)).strip() for li in block.split("<li>")[1:]]


def test_every_change_and_each_rule_version_is_in_the_log(client, alice, infra):
    first, _ = seen(infra, NCCL, at=days_ago(3), labels={"host": "gpu-a"})
    seen(infra, NCCL, at=days_ago(2))                      # v3 again: no new line
    newer = seen_with_version(infra, NCCL, 4, days_ago(1))
    cluster = ClusterRecord.objects.get(team=infra, fingerprint=NCCL.fingerprint)
    cluster.change(alice, status="acknowledged", assignee=alice)
    cluster.change(alice, text="switch port on rack 7")
    client.force_login(alice)
    until = (timezone.now() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    assert client.post(f"/clusters/{cluster.pk}/snooze/", {"until": until}).status_code == 302

    entries = activity_log(cluster)
    matches = [(a.rule_id, a.rule_version, a.trace_id) for a in entries if a.kind == "rule"]
    assert matches == [("rule.nccl.timeout.stream_blocked", 4, newer.pk),
                       ("rule.nccl.timeout.stream_blocked", 3, first.pk)]
    assert all(a.at for a in entries)
    changes = {(a.kind, a.actor.username) for a in entries if a.kind not in ("rule", "created")}
    assert {("status", "alice"), ("assignee", "alice"), ("comment", "alice")} <= changes
    assert any(kind.startswith("snooze") for kind, _ in changes), changes

    page = client.get(f"/clusters/{cluster.pk}/").content.decode()
    lines = activity_items(page)
    assert any("rule.nccl.timeout.stream_blocked v4 matched, first in trace v4" in line for line in lines), lines
    assert any("v3 matched, first in" in line and first.name in line for line in lines), lines
    assert any("alice commented: switch port on rack 7" in line for line in lines), lines
    assert any("alice status: acknowledged → ignored" in line for line in lines), lines
    assert page.count("<time datetime=") == len(lines)  # every line says when
