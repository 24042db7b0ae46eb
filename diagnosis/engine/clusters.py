"""Root-cause clusters within one trace.

Findings join one cluster when they share a root-cause key, or when one declares (in its
rule's `causes`) the other's rule id or root-cause key and the two are close in time and
on the same host/process/device where both say so. The cluster's headline is the earliest
finding that nothing else in the cluster caused.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import msgspec

from diagnosis.engine.results import Cluster, Suppression
from rules.engine.results import RuleFinding
from rules.engine.severity import RANK, highest

CAUSAL_WINDOW_NS = 120 * 10**9
WALL_CLOCK_NS = 10**17  # ns since the epoch: anything later (1973+) is a wall-clock stamp
SCOPE_KEYS = ("host", "pid", "device", "pg", "rank")


@dataclass
class Grouping:
    """One union-find group of findings (indexes into the trace's findings), before it is
    described as a report `Cluster`."""
    members: list[int] = field(default_factory=list)
    headline: int = -1
    why: list[str] = field(default_factory=list)


class _UnionFind:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.parent[max(ra, rb)] = min(ra, rb)
        return True


def _scope(f: RuleFinding) -> dict:
    keys = {**f.group, **f.fingerprint}
    return {k: str(keys[k]) for k in SCOPE_KEYS if keys.get(k) not in (None, "", -1, "-1")}


def _same_scope(a: RuleFinding, b: RuleFinding) -> bool:
    sa, sb = _scope(a), _scope(b)
    return all(sa[k] == sb[k] for k in sa.keys() & sb.keys())


def _causes(a: RuleFinding, b: RuleFinding) -> bool:
    """Does finding a declare that it can cause finding b, close enough in time and place?"""
    if not set(a.causes) & {b.rule_id, b.root_cause}:
        return False
    a_start = a.start_ts or 0
    b_start, b_end = b.start_ts or 0, b.end_ts or b.start_ts or 0
    close = b_end >= a_start - CAUSAL_WINDOW_NS and b_start <= (a.end_ts or a_start) + CAUSAL_WINDOW_NS
    # ts 0 next to a wall-clock time is a log line printed before the file's first stamp: time unknown
    unknown = min(a_start, b_start) == 0 and max(a_start, b_start) > WALL_CLOCK_NS
    return (close or unknown) and _same_scope(a, b)


def _follows_from(a: RuleFinding, b: RuleFinding) -> bool:
    """Does finding b name, as its cause, a row that is finding a's evidence? A survivor's NCCL
    timeout names the failure of the rank it waited for (group `attrs.caused_by` =
    "artifact|loc"): that link crosses ranks, hosts and the collective timeout, where declared
    `causes` (close in time, same scope) cannot."""
    ref = b.group.get("attrs.caused_by")
    return bool(ref) and any(f"{e.artifact}|{e.loc}" == ref for e in a.evidence)


FLOOR = "unexplained.failure"  # rules.engine.features.failures: any other finding at warning or above explains it


def _suppresses(g: RuleFinding, f: RuleFinding) -> bool:
    if f.root_cause in g.suppresses:
        return True
    return f.root_cause == FLOOR and g.root_cause != FLOOR and RANK.get(g.severity, 0) >= RANK["warning"]


def apply_suppressions(findings: list[RuleFinding]) -> tuple[list[RuleFinding], list[Suppression]]:
    """(kept, suppressed): a finding whose root cause another finding's rule `suppresses`
    (on the same scope) is redundant; the report lists it as suppressed, not as a finding."""
    kept, suppressed = [], []
    for f in findings:
        by = next((g for g in findings if g is not f and _suppresses(g, f) and _same_scope(g, f)), None)
        if by is None:
            kept.append(f)
        elif f.root_cause != FLOOR:  # the floor under the rules is dropped, not listed, where a rule explains
            suppressed.append(Suppression(rule_id=f.rule_id, root_cause=f.root_cause, by=by.rule_id))
    return kept, suppressed


def cluster_findings(findings: list[RuleFinding], jobs: list[str] | None = None) -> tuple[list[Grouping], dict[int, int]]:
    """(groups, consequence_of): the groups of findings (by index), and for a finding caused by
    another one of its group, the index of that cause. `jobs`: the folders that are jobs of
    their own when the upload holds several (rules.engine.features.jobs); repeats of one root cause
    group within a job. The findings are not changed."""
    n = len(findings)
    uf = _UnionFind(n)
    why: dict[tuple[int, int], str] = {}
    caused_by: dict[int, int] = {}
    for i, a in enumerate(findings):
        for j, b in enumerate(findings):
            if i != j and _causes(a, b):
                uf.union(i, j)
                caused_by.setdefault(j, i)
                why[(i, j)] = (f"`{a.rule_id}` declares it causes `{b.cause_key}`"
                               " and both happened close together on the same scope")
            elif i != j and _follows_from(a, b):
                uf.union(i, j)
                caused_by.setdefault(j, i)
                why[(i, j)] = (f"`{b.rule_id}` names the failure in `{a.rule_id}`'s evidence as its cause "
                               "(a rank that failed first)")
    # repeats of one problem group by root cause; a finding another one caused goes with its
    # cause instead (two jobs' timeouts of one kind are two incidents when each has its own cause)
    by_root: dict[object, int] = {}
    for i, f in enumerate(findings):
        if i in caused_by:
            continue
        key = (f.cause_key, _job_of(f, jobs)) if jobs else f.cause_key
        if key in by_root:
            uf.union(by_root[key], i)
            why[(by_root[key], i)] = f"same root cause `{f.cause_key}`"
        else:
            by_root[key] = i
    groups: dict[int, Grouping] = {}
    for i in range(n):
        groups.setdefault(uf.find(i), Grouping()).members.append(i)
    consequence_of: dict[int, int] = {}
    for g in groups.values():
        roots = [i for i in g.members if caused_by.get(i) not in g.members] or g.members
        g.headline = min(roots, key=lambda i: (findings[i].start_ts or 0, -RANK.get(findings[i].severity, 0)))
        g.why = sorted({w for (i, j), w in why.items() if i in g.members and j in g.members})
        for i in g.members:
            if i in caused_by and caused_by[i] in g.members:
                consequence_of[i] = caused_by[i]
    return list(groups.values()), consequence_of


def _job_of(finding: RuleFinding, jobs: list[str]) -> str:
    """The job folder the finding's evidence lies in ("" for none: files shared by every job)."""
    for ev in finding.evidence:
        for job in jobs:
            if ev.artifact.startswith(job + "/"):
                return job
    return ""


# Versioned grouping. A cluster's fingerprint is a hash of its cause key (the root cause, else the
# rule id) and its rule's fingerprint fields, under GROUPING_VERSION. Changing the hash or a
# builtin rule's root cause changes the fingerprints of clusters teams already track: bump the
# version and add its hash to FINGERPRINT_HASHES (keep the old ones), or record the old cause in
# RENAMED_CAUSES. The report's clusters then carry the fingerprints they had before
# (`earlier_fingerprints`), and the team's cluster recorded under one of them takes the new one
# and keeps the old (diagnosis.models.ClusterRecord.seen_in): incidents keep landing on it.
GROUPING_VERSION = 1


def _sha256_16(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


FINGERPRINT_HASHES = {1: _sha256_16}
RENAMED_CAUSES: dict[str, str] = {}  # a cause key as it was -> as it is now


def fingerprint(finding: RuleFinding, version: int | None = None, cause: str | None = None) -> str:
    parts = [finding.cause_key if cause is None else cause]
    for k, v in sorted(finding.fingerprint.items()):
        parts.append(f"{k}={v}")
    return FINGERPRINT_HASHES[version or GROUPING_VERSION]("|".join(parts))


def earlier_fingerprints(finding: RuleFinding) -> tuple[str, ...]:
    """The fingerprints the finding's cluster had under earlier grouping versions and root-cause
    names, newest first (none while nothing changed)."""
    causes = [finding.cause_key, *sorted(old for old, new in RENAMED_CAUSES.items() if new == finding.cause_key)]
    current = fingerprint(finding)
    out: list[str] = []
    for version in sorted(FINGERPRINT_HASHES, reverse=True):
        for cause in causes:
            fp = fingerprint(finding, version, cause)
            if fp != current and fp not in out:
                out.append(fp)
    return tuple(out)


def describe(groups: list[Grouping], findings: list[RuleFinding], finding_ids: list[str]) -> list[Cluster]:
    """Clusters for the report, ordered by severity, then SLO impact, then time."""
    described = []
    for g in groups:
        head = findings[g.headline]
        described.append(Cluster(
            id="",  # numbered once ordered
            fingerprint=fingerprint(head),
            earlier_fingerprints=earlier_fingerprints(head),
            root_cause=head.root_cause,
            title=head.title,
            severity=highest(findings[i].severity for i in g.members),
            headline=finding_ids[g.headline],
            findings=tuple(finding_ids[i] for i in sorted(g.members, key=lambda i: findings[i].start_ts or 0)),
            slos=tuple(sorted({slo for i in g.members if (slo := findings[i].slo)})),
            why_grouped="; ".join(g.why) if g.why else "a single finding",
            start_ts=min(findings[i].start_ts or 0 for i in g.members),
        ))
    described.sort(key=lambda c: (-RANK.get(c.severity, 0), -len(c.slos), c.start_ts))
    return [msgspec.structs.replace(c, id=f"C{n}") for n, c in enumerate(described, 1)]
