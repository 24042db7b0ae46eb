"""Root-cause clusters within one trace.

Findings join one cluster when they share a root-cause key, or when one declares (in its
rule's `causes`) the other's rule id or root-cause key and the two are close in time and
on the same host/process/device where both say so. The cluster's headline is the earliest
finding that nothing else in the cluster caused.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from diagnosis.severity import RANK, highest

CAUSAL_WINDOW_NS = 120 * 10**9
WALL_CLOCK_NS = 10**17  # ns since the epoch: anything later (1973+) is a wall-clock stamp
SCOPE_KEYS = ("host", "pid", "device", "pg", "rank")


@dataclass
class Cluster:
    members: list[int] = field(default_factory=list)   # finding indexes
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


def _scope(f: dict) -> dict:
    group = dict(f.get("group") or {})
    group.update(f.get("fingerprint") or {})
    return {k: str(group[k]) for k in SCOPE_KEYS if group.get(k) not in (None, "", -1, "-1")}


def _same_scope(a: dict, b: dict) -> bool:
    sa, sb = _scope(a), _scope(b)
    return all(sa[k] == sb[k] for k in sa.keys() & sb.keys())


def _causes(a: dict, b: dict) -> bool:
    """Does finding a declare that it can cause finding b, close enough in time and place?"""
    targets = set(a.get("causes") or ())
    if not targets & {b.get("rule_id"), b.get("root_cause")}:
        return False
    a_start = a.get("start_ts") or 0
    b_start, b_end = b.get("start_ts") or 0, b.get("end_ts") or b.get("start_ts") or 0
    close = b_end >= a_start - CAUSAL_WINDOW_NS and b_start <= (a.get("end_ts") or a_start) + CAUSAL_WINDOW_NS
    # ts 0 next to a wall-clock time is a log line printed before the file's first stamp: time unknown
    unknown = min(a_start, b_start) == 0 and max(a_start, b_start) > WALL_CLOCK_NS
    return (close or unknown) and _same_scope(a, b)


def _follows_from(a: dict, b: dict) -> bool:
    """Does finding b name, as its cause, a row that is finding a's evidence? A survivor's NCCL
    timeout names the failure of the rank it waited for (group `attrs.caused_by` =
    "artifact|loc"): that link crosses ranks, hosts and the collective timeout, where declared
    `causes` (close in time, same scope) cannot."""
    ref = (b.get("group") or {}).get("attrs.caused_by")
    return bool(ref) and any(f"{e.get('artifact')}|{e.get('loc')}" == ref for e in a.get("evidence") or ())


def apply_suppressions(findings: list[dict]) -> tuple[list[dict], list[dict]]:
    """(kept, suppressed): a finding whose root cause another finding's rule `suppresses`
    (on the same scope) is redundant; the report lists it as suppressed, not as a finding."""
    kept, suppressed = [], []
    for f in findings:
        by = next((g for g in findings if g is not f and f.get("root_cause") in (g.get("suppresses") or ())
                   and _same_scope(g, f)), None)
        if by is None:
            kept.append(f)
        else:
            suppressed.append({"rule_id": f["rule_id"], "root_cause": f.get("root_cause") or "",
                               "by": by["rule_id"]})
    return kept, suppressed


def cluster_findings(findings: list[dict]) -> list[Cluster]:
    n = len(findings)
    uf = _UnionFind(n)
    why: dict[tuple[int, int], str] = {}
    caused_by: dict[int, int] = {}
    by_root: dict[str, int] = {}
    for i, f in enumerate(findings):
        key = f.get("root_cause") or f.get("rule_id")
        if key in by_root:
            uf.union(by_root[key], i)
            why[(by_root[key], i)] = f"same root cause `{key}`"
        else:
            by_root[key] = i
    for i, a in enumerate(findings):
        for j, b in enumerate(findings):
            if i != j and _causes(a, b):
                uf.union(i, j)
                caused_by.setdefault(j, i)
                why[(i, j)] = (f"`{a['rule_id']}` declares it causes `{b.get('root_cause') or b['rule_id']}`"
                               " and both happened close together on the same scope")
            elif i != j and _follows_from(a, b):
                uf.union(i, j)
                caused_by.setdefault(j, i)
                why[(i, j)] = (f"`{b['rule_id']}` names the failure in `{a['rule_id']}`'s evidence as its cause "
                               "(a rank that failed first)")
    groups: dict[int, Cluster] = {}
    for i in range(n):
        groups.setdefault(uf.find(i), Cluster()).members.append(i)
    for c in groups.values():
        roots = [i for i in c.members if caused_by.get(i) not in c.members] or c.members
        c.headline = min(roots, key=lambda i: (findings[i].get("start_ts") or 0,
                                               -RANK.get(findings[i]["severity"], 0)))
        c.why = sorted({w for (i, j), w in why.items() if i in c.members and j in c.members})
        for i in c.members:
            if i in caused_by and caused_by[i] in c.members:
                findings[i]["consequence_of"] = caused_by[i]
    return list(groups.values())


def fingerprint(finding: dict) -> str:
    parts = [finding.get("root_cause") or finding["rule_id"]]
    for k, v in sorted((finding.get("fingerprint") or {}).items()):
        parts.append(f"{k}={v}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def describe(clusters: list[Cluster], findings: list[dict], finding_ids: list[str]) -> list[dict]:
    """Clusters for the report, ordered by severity, then SLO impact, then time."""
    out = []
    for c in clusters:
        head = findings[c.headline]
        slos = sorted({findings[i]["slo"] for i in c.members if findings[i].get("slo")})
        severity = highest(findings[i]["severity"] for i in c.members)
        why = "; ".join(c.why) if c.why else "a single finding"
        out.append({
            "fingerprint": fingerprint(head),
            "root_cause": head.get("root_cause") or "",
            "title": head["title"],
            "severity": severity,
            "headline": finding_ids[c.headline],
            "findings": [finding_ids[i] for i in sorted(c.members, key=lambda i: findings[i].get("start_ts") or 0)],
            "slos": slos,
            "why_grouped": why,
            "start_ts": min(findings[i].get("start_ts") or 0 for i in c.members),
        })
    out.sort(key=lambda c: (-RANK.get(c["severity"], 0), -len(c["slos"]), c["start_ts"]))
    for n, c in enumerate(out, 1):
        c["id"] = f"C{n}"
    return out
