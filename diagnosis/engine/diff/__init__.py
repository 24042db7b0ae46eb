"""Two reports of the same workload compared: what a change made appear, vanish or stay, how its
SLIs moved, and whether that is a regression a CI gate should stop.

Pure: the inputs are two report dicts (as `tracedoc diagnose --format json` writes them) and,
where the traces were diagnosed in-process, their `TraceFigures`; nothing is read or written.
A figure neither side can give is reported as missing with the reason, never estimated.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable, Literal, NamedTuple

import numpy as np

from diagnosis.engine.trace_figures import KernelTime, TraceFigures
from rules.engine.severity import RANK, at_least

Status = Literal["appeared", "disappeared", "persisted"]
Worse = Literal["higher", "lower"]

STEP_SERIES_CAP = 5000  # diagnosis.engine.series.MAX_SERIES_POINTS: the series holds at most this many steps


@dataclass(frozen=True)
class FindingChange:
    status: Status
    rule_id: str
    root_cause: str
    title: str
    severity: str                 # in the new report; the base's for a finding that disappeared
    base_severity: str | None     # None when the base lacks it
    base_id: str | None
    new_id: str | None


@dataclass(frozen=True)
class ClusterChange:
    status: Status
    fingerprint: str
    root_cause: str
    title: str
    severity: str
    base_severity: str | None
    base_id: str | None
    new_id: str | None
    findings: int                 # members in the new report (the base's when it disappeared)


@dataclass(frozen=True)
class ViolationChange:
    status: Status
    slo: str
    sli: str
    title: str
    base_observed: str | None
    new_observed: str | None


@dataclass(frozen=True)
class SliDelta:
    name: str
    label: str
    unit: str
    base: float | None
    new: float | None
    worse_when: Worse | None      # None: reported, never gated (see GPU busy below)
    change_pct: float | None      # (new - base) / base; None when either is missing or base is 0
    regressed: bool               # worse by more than --fail-on-regression
    note: str = ""                # why a figure is missing, or what it is computed over


@dataclass(frozen=True)
class KernelDelta:
    name: str
    base_ms: float | None
    new_ms: float | None
    base_calls: int | None
    new_calls: int | None
    change_pct: float | None


@dataclass(frozen=True)
class Verdict:
    regression: bool
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Thresholds:
    fail_on: str                           # a new finding at or above this severity is a regression
    fail_on_regression_pct: float | None   # an SLI worse by more than this is one; None: SLIs never gate


@dataclass(frozen=True)
class ReportDiff:
    findings: tuple[FindingChange, ...]
    clusters: tuple[ClusterChange, ...]
    violations: tuple[ViolationChange, ...]
    slis: tuple[SliDelta, ...]
    kernels: tuple[KernelDelta, ...]
    verdict: Verdict
    thresholds: Thresholds

    def to_dict(self) -> dict:
        return asdict(self)

    def findings_by_status(self, status: Status) -> tuple[FindingChange, ...]:
        return tuple(f for f in self.findings if f.status == status)

    def clusters_by_status(self, status: Status) -> tuple[ClusterChange, ...]:
        return tuple(c for c in self.clusters if c.status == status)

    def sli(self, name: str) -> SliDelta:
        return next(s for s in self.slis if s.name == name)


def compare(base: dict, new: dict, base_figures: TraceFigures | None = None,
            new_figures: TraceFigures | None = None, *, fail_on: str = "error",
            fail_on_regression_pct: float | None = None) -> ReportDiff:
    """The diff of `new` against `base`; figures None means that side was not diagnosed from
    its events (its report alone cannot give GPU busy, TTFT or kernel times)."""
    thresholds = Thresholds(fail_on=fail_on, fail_on_regression_pct=fail_on_regression_pct)
    findings = _finding_changes(base["findings"], new["findings"])
    clusters = _cluster_changes(base["clusters"], new["clusters"])
    violations = _violation_changes(base["violations"], new["violations"])
    slis = tuple(_delta(figures, fail_on_regression_pct)
                 for figures in _sli_specs(base, new, base_figures, new_figures))
    kernels = _kernel_deltas(base_figures, new_figures)
    verdict = _verdict(findings, violations, slis, thresholds)
    return ReportDiff(findings=findings, clusters=clusters, violations=violations, slis=slis,
                      kernels=kernels, verdict=verdict, thresholds=thresholds)


def _pair(base: list[dict], new: list[dict], keys) -> list[tuple[dict | None, dict | None]]:
    """Pairs (base item, new item) matched on the first key function that matches, each item
    used once, in report order; unmatched items pair with None."""
    pairs: list[tuple[dict | None, dict | None]] = []
    left, right = list(base), list(new)
    for key in keys:
        unmatched = []
        for b in left:
            match = next((n for n in right if key(n) == key(b)), None)
            if match is None:
                unmatched.append(b)
            else:
                right.remove(match)
                pairs.append((b, match))
        left = unmatched
    return pairs + [(b, None) for b in left] + [(None, n) for n in right]


def _status(b: dict | None, n: dict | None) -> Status:
    return "persisted" if b is not None and n is not None else "appeared" if b is None else "disappeared"


def _either(b: dict | None, n: dict | None) -> dict:
    """The new item of a pair, else the base's."""
    item = n if n is not None else b
    assert item is not None  # _pair never pairs None with None
    return item


def _finding_changes(base: list[dict], new: list[dict]) -> tuple[FindingChange, ...]:
    out = []
    for b, n in _pair(base, new, [lambda f: (f["rule_id"], f.get("root_cause") or "")]):
        f = _either(b, n)
        out.append(FindingChange(status=_status(b, n), rule_id=f["rule_id"], root_cause=f.get("root_cause") or "",
                                 title=f["title"], severity=f["severity"],
                                 base_severity=b["severity"] if b is not None else None,
                                 base_id=b["id"] if b is not None else None, new_id=n["id"] if n is not None else None))
    return tuple(sorted(out, key=_change_order))


def _cluster_changes(base: list[dict], new: list[dict]) -> tuple[ClusterChange, ...]:
    """Clusters match on their fingerprint, then (a different headline finding) on root cause."""
    out = []
    for b, n in _pair(base, new, [lambda c: c["fingerprint"], lambda c: c.get("root_cause") or c["title"]]):
        c = _either(b, n)
        out.append(ClusterChange(status=_status(b, n), fingerprint=c["fingerprint"],
                                 root_cause=c.get("root_cause") or "", title=c["title"], severity=c["severity"],
                                 base_severity=b["severity"] if b is not None else None,
                                 base_id=b["id"] if b is not None else None, new_id=n["id"] if n is not None else None,
                                 findings=len(c["findings"])))
    return tuple(sorted(out, key=_change_order))


_STATUS_ORDER = {"appeared": 0, "disappeared": 1, "persisted": 2}


def _change_order(change) -> tuple:
    return _STATUS_ORDER[change.status], -RANK.get(change.severity, -1), change.root_cause


def _violation_changes(base: list[dict], new: list[dict]) -> tuple[ViolationChange, ...]:
    # an SLO whose SLI could not be computed ("error") is no violation: nothing to compare
    base, new = ([v for v in side if "error" not in v] for side in (base, new))
    out = []
    for b, n in _pair(base, new, [lambda v: (v["slo"], v["sli"])]):
        v = _either(b, n)
        out.append(ViolationChange(status=_status(b, n), slo=v["slo"], sli=v["sli"], title=v.get("title") or "",
                                   base_observed=b.get("observed_text") if b is not None else None,
                                   new_observed=n.get("observed_text") if n is not None else None))
    return tuple(sorted(out, key=lambda v: (_STATUS_ORDER[v.status], v.slo)))


class SliFigures(NamedTuple):
    name: str
    label: str
    unit: str
    worse_when: Worse | None
    base: float | None
    new: float | None
    note: str


def _sli_specs(base: dict, new: dict, base_fig: TraceFigures | None,
               new_fig: TraceFigures | None) -> list[SliFigures]:
    b_steps, n_steps = _steady_steps(base), _steady_steps(new)
    step_note = _steps_note(b_steps, n_steps)
    specs = [
        SliFigures("step_latency_p50", "step latency p50", "ms", "higher", _pct(b_steps, 50), _pct(n_steps, 50),
                   step_note),
        SliFigures("step_latency_p99", "step latency p99", "ms", "higher", _pct(b_steps, 99), _pct(n_steps, 99),
                   step_note),
        # the tail over the median: what a change that adds spikes moves even when every step got faster
        SliFigures("step_latency_tail", "step latency tail (p99/p50)", "x", "higher", _tail(b_steps), _tail(n_steps),
                   step_note),
    ]
    no_events = "needs the trace's events (diagnose the files in-process)"
    ttft = (base_fig.ttft_ms if base_fig else None, new_fig.ttft_ms if new_fig else None)
    specs.append(SliFigures("ttft", "time to first token", "ms", "higher", *ttft,
                  _missing_note(ttft, (base_fig, new_fig), "no token-emitting steps", no_events)))
    # Reported, never gated: a faster kernel lowers the busy share as much as a starved GPU does.
    busy = (base_fig.gpu_busy_pct if base_fig else None, new_fig.gpu_busy_pct if new_fig else None)
    specs.append(SliFigures("gpu_busy_pct", "GPU busy (steady state)", "%", None, *busy,
                  _missing_note(busy, (base_fig, new_fig), "fewer than 10 kernels in the steady state", no_events)))
    util = (_mean_gpu_util(base), _mean_gpu_util(new))
    if any(u is not None for u in util):  # telemetry is a capture of its own: only where one side has it
        specs.append(SliFigures("gpu_util_pct", "GPU utilisation (telemetry mean)", "%", None, *util,
                      _missing_note(util, (base, new), "no GPU utilisation samples", "")))
    return specs


def _steady_steps(report: dict) -> list[float]:
    """Per-step latencies after the cold start (the report's series flags cold steps)."""
    return [s["ms"] for s in report["trace"].get("series", {}).get("step_latency_ms", []) if not s.get("cold")]


def _steps_note(base: list[float], new: list[float]) -> str:
    if not base or not new:
        which = " and ".join(side for side, steps in (("base", base), ("new", new)) if not steps)
        return f"no decode or profiler steps in {which}"
    capped = (f" (the report keeps the first {STEP_SERIES_CAP} steps)"
              if max(len(base), len(new)) >= STEP_SERIES_CAP else "")
    return f"steady-state steps: {len(base)} base, {len(new)} new{capped}"


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def _tail(values: list[float]) -> float | None:
    median, p99 = _pct(values, 50), _pct(values, 99)
    return round(p99 / median, 3) if median and p99 is not None else None  # both or neither


def _missing_note(values: Iterable, sources: Iterable, absent: str, no_source: str) -> str:
    """Why each missing side is missing: no source at all, or the source has no such figure."""
    why = {side: no_source if source is None and no_source else absent
           for side, value, source in zip(("base", "new"), values, sources) if value is None}
    if len(why) == 2 and why["base"] == why["new"]:
        return f"base and new: {why['base']}"
    return "; ".join(f"{side}: {reason}" for side, reason in why.items())


def _mean_gpu_util(report: dict) -> float | None:
    samples = [v for device in report["trace"].get("series", {}).get("gpu_telemetry", {}).values()
               for _, v in device.get("gpu_util_pct", [])]
    return round(float(np.mean(samples)), 1) if samples else None


def _delta(figures: SliFigures, allowed_pct: float | None) -> SliDelta:
    base, new, worse_when = figures.base, figures.new, figures.worse_when
    change = None if base is None or new is None or base == 0 else round(100 * (new - base) / base, 1)
    regressed = False
    if allowed_pct is not None and worse_when is not None and base is not None and new is not None:
        if change is None:  # base 0: any move the wrong way is unbounded
            regressed = new > base if worse_when == "higher" else new < base
        else:
            regressed = change > allowed_pct if worse_when == "higher" else change < -allowed_pct
    return SliDelta(name=figures.name, label=figures.label, unit=figures.unit, base=base, new=new,
                    worse_when=worse_when, change_pct=change, regressed=regressed, note=figures.note)


def _kernel_deltas(base: TraceFigures | None, new: TraceFigures | None) -> tuple[KernelDelta, ...]:
    """The new trace's top kernels, then base top kernels the new one no longer has among its top."""
    b = {k.name: k for k in (base.top_kernels if base else ())}
    n = {k.name: k for k in (new.top_kernels if new else ())}
    names = list(n) + [name for name in b if name not in n]

    def figures(k: KernelTime | None) -> tuple[float | None, int | None]:
        return (k.total_ms, k.calls) if k else (None, None)
    out = []
    for name in names:
        (b_ms, b_calls), (n_ms, n_calls) = figures(b.get(name)), figures(n.get(name))
        change = round(100 * (n_ms - b_ms) / b_ms, 1) if b_ms and n_ms is not None else None
        out.append(KernelDelta(name=name, base_ms=b_ms, new_ms=n_ms, base_calls=b_calls, new_calls=n_calls,
                               change_pct=change))
    return tuple(out)


def _verdict(findings: tuple[FindingChange, ...], violations: tuple[ViolationChange, ...],
             slis: tuple[SliDelta, ...], t: Thresholds) -> Verdict:
    reasons = []
    for f in findings:
        if f.status == "appeared" and at_least(f.severity, t.fail_on):
            reasons.append(f"new {f.severity} finding `{f.rule_id}`: {f.title}")
        elif (f.status == "persisted" and at_least(f.severity, t.fail_on)
              and not at_least(f.base_severity or "info", t.fail_on)):
            reasons.append(f"`{f.rule_id}` rose from {f.base_severity} to {f.severity}: {f.title}")
    for s in slis:
        if s.regressed:
            how = f"{s.change_pct:+.1f}%" if s.change_pct is not None else "up from 0"
            unit = s.unit if s.unit in ("x", "%") else f" {s.unit}"
            reasons.append(f"{s.label} {how} ({s.base:g}{unit} -> {s.new:g}{unit}), more than the "
                           f"{t.fail_on_regression_pct:g}% allowed")
    if t.fail_on_regression_pct is not None:  # an SLO newly violated is an SLI regression too
        reasons += [f"SLO `{v.slo}` newly violated: {v.sli} = {v.new_observed}"
                    for v in violations if v.status == "appeared"]
    return Verdict(regression=bool(reasons), reasons=tuple(reasons))
