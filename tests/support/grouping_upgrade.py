"""Run by tests/diagnosis/test_grouping_version.py in a subprocess, on a fresh PostgreSQL
database: clusters are opened under the schema and grouping before versioned grouping
(diagnosis 0004), the migrations run, then the fingerprints change (a new hash; a renamed root
cause) and the same incidents are recorded again. Prints one JSON object of what it saw."""
from __future__ import annotations

import msgspec
import hashlib
import json

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.migrations.executor import MigrationExecutor  # noqa: E402

BEFORE = [("diagnosis", "0004_cluster_triage_sightings_activity")]


def incidents() -> list:
    from rules.engine.results import Evidence, RuleFinding
    evidence = (Evidence(artifact="rank0.log", loc="line 3", ts=10, text="Watchdog caught collective operation timeout"),)
    return [
        RuleFinding(rule_id="nccl.watchdog-timeout", title="NCCL watchdog timeout", severity="error",
                root_cause="nccl.timeout.stream_blocked", start_ts=10, end_ts=20, explanation="x",
                evidence=evidence, fingerprint={"pg": "0"}),
        RuleFinding(rule_id="memory.oom", title="CUDA out of memory", severity="critical",
                root_cause="memory.oom", start_ts=5000 * 10**9, end_ts=5001 * 10**9, explanation="x",
                evidence=(msgspec.structs.replace(evidence[0], artifact="rank1.log"),), fingerprint={"host": "n1"}),
    ]


def report(findings: list):
    from diagnosis.engine.clusters import cluster_findings, describe
    from diagnosis.engine.results import Report, TraceSummary
    ids = [f"F{n}" for n in range(1, len(findings) + 1)]
    groups, _ = cluster_findings(findings)
    clusters = describe(groups, findings, ids)
    of = {i: c.id for c in clusters for i in c.findings}
    numbered = tuple(f.reported(id=i, cluster=of[i]) for f, i in zip(findings, ids))
    return Report(trace=TraceSummary(artifacts=(), events=0, start_ts=None, end_ts=None),
                  findings=numbered, clusters=tuple(clusters))


def main() -> None:
    from diagnosis.engine import clusters as grouping
    seen: dict = {}
    old_findings = incidents()
    # the OOM rule's root cause was "cuda.oom" when its cluster was opened
    old_findings[1] = msgspec.structs.replace(old_findings[1], root_cause="cuda.oom")
    opened = report(old_findings)
    call_command("migrate", "diagnosis", BEFORE[0][1], verbosity=0)
    old = MigrationExecutor(connection).loader.project_state(BEFORE).apps
    team = old.get_model("accounts", "Team").objects.create(name="infra", slug="infra")
    for c in opened.clusters:  # opened and triaged before this change
        old.get_model("diagnosis", "ClusterRecord").objects.create(
            team_id=team.pk, fingerprint=c.fingerprint, root_cause=c.root_cause, title=c.title,
            severity=c.severity, status="acknowledged", trace_count=1)
    call_command("migrate", verbosity=0)

    from diagnosis.models import ClusterRecord, record_report
    from diagnosis.engine.results import Report
    from ingest.models import Trace
    records = {r.fingerprint: r for r in ClusterRecord.objects.all()}
    seen["opened"] = {fp: (r.pk, r.grouping_version) for fp, r in records.items()}

    # the grouping changes: a new hash, and the OOM rule's root cause renamed
    grouping.GROUPING_VERSION = 2
    grouping.FINGERPRINT_HASHES[2] = lambda key: hashlib.sha256(b"v2|" + key.encode()).hexdigest()[:16]
    grouping.RENAMED_CAUSES["cuda.oom"] = "memory.oom"
    new = report(incidents())
    seen["fingerprints"] = {"before": [c.fingerprint for c in opened.clusters],
                            "after": [c.fingerprint for c in new.clusters],
                            "carried": [list(c.earlier_fingerprints) for c in new.clusters]}
    traces = [Trace.objects.create(team_id=team.pk, name=f"t{i}") for i in range(3)]
    record_report(traces[0], new)
    record_report(traces[1], new)
    # a report of the earlier grouping recorded again (a reconcile of a stored report)
    record_report(traces[2], Report.from_dict(json.loads(json.dumps(opened.to_dict()))))
    seen["after"] = [{"pk": r.pk, "fingerprint": r.fingerprint, "grouping_version": r.grouping_version,
                      "status": r.status, "trace_count": r.trace_count,
                      "earlier": sorted(r.earlier.values_list("fingerprint", flat=True)),
                      "traces": sorted(r.findings.values_list("trace__name", flat=True))}
                     for r in ClusterRecord.objects.order_by("pk")]
    seen["vendor"] = connection.vendor
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
