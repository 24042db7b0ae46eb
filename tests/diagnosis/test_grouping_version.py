"""Versioned grouping: clusters opened before a fingerprint change (a new hash, a renamed root
cause) keep receiving the same incidents after it. On the real PostgreSQL: a fresh database is
migrated to before versioned grouping (diagnosis 0004), clusters are opened there, the
migrations run, the grouping changes and the incidents come again (tests/support/grouping_upgrade.py)."""
from __future__ import annotations

import json
import subprocess
import sys

import msgspec
import pytest

from diagnosis.engine.clusters import FINGERPRINT_HASHES, GROUPING_VERSION, earlier_fingerprints, fingerprint
from rules.engine.results import RuleFinding
from tests.support.stack import ROOT, postgres_database, reachable, stack_env

pytestmark = pytest.mark.integration


def test_the_fingerprint_is_unchanged_under_version_1():
    """sha256(cause|k=v...)[:16], as every cluster recorded so far; nothing earlier to carry."""
    import hashlib
    f = RuleFinding(rule_id="r", title="t", severity="error", root_cause="nccl.timeout", fingerprint={"pg": 0, "a": 1})
    assert GROUPING_VERSION == 1 and set(FINGERPRINT_HASHES) == {1}
    assert fingerprint(f) == hashlib.sha256(b"nccl.timeout|a=1|pg=0").hexdigest()[:16]
    assert earlier_fingerprints(f) == ()


def test_clusters_opened_before_a_fingerprint_change_keep_their_incidents(tmp_path):
    if not reachable(5432):
        pytest.skip("PostgreSQL is not running (make test starts it: scripts/ensure-services.sh)")
    with postgres_database() as database_url:
        env = stack_env(tmp_path, database_url, "memory://")
        done = subprocess.run([sys.executable, "-m", "tests.support.grouping_upgrade"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["vendor"] == "postgresql"
    before, after = seen["fingerprints"]["before"], seen["fingerprints"]["after"]
    assert set(before).isdisjoint(after)  # every fingerprint changed
    assert [b in carried for b, carried in zip(before, seen["fingerprints"]["carried"])] == [True, True]
    assert sorted(pk for pk, version in seen["opened"].values()) == [r["pk"] for r in seen["after"]]
    assert {version for _, version in seen["opened"].values()} == {1}  # the migration's version
    for record in seen["after"]:  # the same two clusters, no third one
        assert record["fingerprint"] in after and record["grouping_version"] == 2
        assert record["earlier"] == [b for b in before if b in record["earlier"]] and len(record["earlier"]) == 1
        assert record["status"] == "acknowledged"  # triage kept
        assert record["traces"] == ["t0", "t1", "t2"] and record["trace_count"] == 3


def test_the_report_carries_earlier_fingerprints_only_while_a_change_is_carried(monkeypatch):
    from diagnosis.engine import clusters
    from diagnosis.engine.clusters import cluster_findings, describe
    from diagnosis.engine.results import Cluster
    f = RuleFinding(rule_id="r", title="t", severity="error", root_cause="memory.oom", fingerprint={"host": "n1"})
    groups, _ = cluster_findings([f])
    [plain] = describe(groups, [f], ["F1"])
    assert "earlier_fingerprints" not in msgspec.to_builtins(plain)
    monkeypatch.setitem(clusters.RENAMED_CAUSES, "cuda.oom", "memory.oom")
    [carried] = describe(groups, [f], ["F1"])
    assert carried.fingerprint == plain.fingerprint  # the cause as it is now
    assert carried.earlier_fingerprints == (fingerprint(f, cause="cuda.oom"),)
    assert msgspec.convert(msgspec.to_builtins(carried), Cluster) == carried
