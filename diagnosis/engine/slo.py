"""SLOs: an SLI computed from the events, an objective, a window; violations with burn rate.

SLIs are a fixed, documented set of functions (SLI_FUNCTIONS): teams pick one by name and
set their own objective and window in YAML; no code comes from the YAML.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import msgspec
import numpy as np
import pandas as pd
import yaml

from diagnosis.engine import slis
from diagnosis.engine.results import FailedSLO, Outcome, Violation
from ingest.engine import interruptions
from rules.engine.results import Finding

BUILTIN = Path(__file__).resolve().parents[1] / "slos" / "builtin.yaml"  # diagnosis/slos, beside the app
_OBJECTIVE = re.compile(r"^\s*(p\d{2,3}|max|mean|ratio|count)\s*(<=|>=|<|>)\s*([0-9.]+)\s*(ms|s|us|%|)\s*$")
_UNIT = {"ms": 1.0, "s": 1000.0, "us": 0.001, "%": 0.01, "": 1.0}
_DURATION = re.compile(r"^\s*([0-9.]+)\s*(ms|s|m|h)\s*$")
_DURATION_NS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
MAX_WINDOWS = 10_000


class SLOError(ValueError):
    pass


@dataclass
class SLO:
    id: str
    title: str
    sli: str
    objective: str
    window: str = "60s"

    def parsed(self) -> tuple[str, str, float]:
        m = _OBJECTIVE.match(self.objective)
        if not m:
            raise SLOError(f"SLO {self.id}: objective {self.objective!r} is not '<stat> <op> <number>[unit]' "
                           "(stat: p50..p999, max, mean, ratio, count)")
        stat, op, number, unit = m.groups()
        return stat, op, float(number) * _UNIT[unit]

    def window_ns(self) -> int:
        m = _DURATION.match(self.window)
        if not m:
            raise SLOError(f"SLO {self.id}: window {self.window!r} is not a duration like 60s or 5m")
        return int(float(m.group(1)) * _DURATION_NS[m.group(2)])


_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's when built with it: 7x faster


def load_slos(text: str | None = None, source: str = "builtin") -> list[SLO]:
    docs = yaml.load(text if text is not None else BUILTIN.read_text(), Loader=_SafeLoader) or []
    out = []
    for i, d in enumerate(docs):
        try:
            slo = SLO(**{k: str(v) for k, v in d.items()})
        except TypeError as e:
            raise SLOError(f"{source}: SLO #{i + 1}: {e}") from None
        if slo.sli not in slis.SLI_FUNCTIONS:
            raise SLOError(f"{source}: SLO {slo.id}: unknown sli {slo.sli!r} "
                           f"(known: {', '.join(sorted(slis.SLI_FUNCTIONS))})")
        try:
            slo.parsed(), slo.window_ns()
        except SLOError as e:
            raise SLOError(f"{source}: {e}") from None
        out.append(slo)
    return out


def _stat(values: np.ndarray, stat: str) -> float:
    if stat.startswith("p"):
        q = int(stat[1:]) / (10 ** (len(stat) - 1))
        return float(np.quantile(values, q))
    if stat == "max":
        return float(values.max())
    if stat == "mean" or stat == "ratio":
        return float(values.mean())
    return float(values.sum())  # count


def _ok(observed: float, op: str, target: float) -> bool:
    return {"<=": observed <= target, "<": observed < target,
            ">=": observed >= target, ">": observed > target}[op]


def _burn_rate(values: np.ndarray, stat: str, op: str, target: float, observed: float) -> float:
    """How fast the error budget burns: 1.0 spends it exactly over the window."""
    if stat.startswith("p"):
        budget = 1 - int(stat[1:]) / (10 ** (len(stat) - 1))
        bad = float((values > target).mean()) if op.startswith("<") else float((values < target).mean())
        return bad / budget if budget > 0 else float("inf")
    if stat == "ratio":
        return (1 - observed) / (1 - target) if target < 1 else float("inf")
    if stat == "count":
        return observed / max(target, 1.0)
    return observed / target if target else float("inf")


def evaluate_slo(slo: SLO, ctx) -> Violation | None:
    """The SLO's worst violating window on this trace, or None when every window meets it."""
    obs: pd.DataFrame = slis.SLI_FUNCTIONS[slo.sli](ctx)
    stat, op, target = slo.parsed()
    if obs is None or obs.empty:
        return None
    window = slo.window_ns()
    start = int(obs["ts"].min())
    buckets = ((obs["ts"] - start) // window).astype("int64")
    if buckets.max() >= MAX_WINDOWS:
        raise SLOError(f"SLO {slo.id}: window {slo.window} gives more than {MAX_WINDOWS:,} windows")
    worst: _Window | None = None
    for b, part in obs.groupby(buckets, sort=True):
        values = part["value"].to_numpy(dtype=float)
        observed = _stat(values, stat)
        if not _ok(observed, op, target):
            burn = _burn_rate(values, stat, op, target, observed)
            if worst is None or burn > worst.burn_rate:
                worst = _Window((start + int(b) * window, start + (int(b) + 1) * window), observed, burn,
                                int(len(values)))
    if worst is None:
        return None
    unit = slis.SLI_UNITS.get(slo.sli, "")
    return Violation(
        slo=slo.id, title=slo.title, sli=slo.sli, objective=slo.objective,
        window=worst.bounds, observed=round(worst.observed, 4),
        observed_text=f"{stat} {worst.observed:.4g}{unit}",
        burn_rate=round(min(worst.burn_rate, 1e6), 2), samples=worst.samples)


@dataclass(frozen=True)
class _Window:
    bounds: tuple[int, int]
    observed: float
    burn_rate: float
    samples: int


def evaluate_slos(ctx, findings: Sequence[Finding], slos: list[SLO] | None = None) -> list[Outcome]:
    """Violations, each linked to the findings (by report id) that explain it: findings that
    name the SLO and whose time overlaps the violating window. SLOs that failed come last."""
    violations: list[Outcome] = []
    failed: list[Outcome] = []
    for slo in slos if slos is not None else load_slos():
        try:
            v = evaluate_slo(slo, ctx)
        except Exception as e:  # one broken SLI never hides the others
            interruptions.reraise(e)
            failed.append(FailedSLO(slo=slo.id, error=f"{type(e).__name__}: {e}"))
            continue
        if v is None:
            continue
        lo, hi = v.window
        explained = tuple(f.id for f in findings
                          if f.slo == slo.id and (f.end_ts or 0) >= lo - 10**9 and (f.start_ts or 0) <= hi)
        violations.append(msgspec.structs.replace(v, findings=explained))
    return violations + failed
