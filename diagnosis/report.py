"""Build the report (DESIGN.md "Interfaces") from parsed artifacts and their events."""
from __future__ import annotations

import pandas as pd

from diagnosis import clusters as clustering
from diagnosis.severity import RANK
from ingest.progress import DIAGNOSIS_STAGES as STAGES
from rules.features import distinct_text

REPORT_VERSION = 1


def _no_stage(stage: str, done: float) -> None:
    pass


def evaluate(events: pd.DataFrame, rules, on_stage=None) -> tuple[list[dict], list[dict], object]:
    """Run the rules over the events; returns (findings, rule errors, trace context).
    `on_stage(stage, done)` hears the features stage, then each rule's share of the rules stage."""
    from rules.compiler import compile_rule
    from rules.evaluator import evaluate_rules, precompute_features
    from rules.features import TraceContext
    stage = on_stage or _no_stage
    ctx = TraceContext(events)
    compiled, errors = [], []
    for rule in rules or []:
        try:
            compiled.append(compile_rule(rule))
        except Exception as e:  # one bad rule never stops the others
            errors.append({"rule_id": getattr(rule, "id", "?"), "error": str(e)})
    stage("features", STAGES["features"])
    precompute_features(compiled, ctx)
    lo, hi = STAGES["rules"], STAGES["clusters"]

    def on_rule(done: int, total: int) -> None:
        stage("rules", lo + (hi - lo) * done / total)
    findings, eval_errors = evaluate_rules(compiled, ctx, on_rule=on_rule if on_stage else None)
    return findings, errors + list(eval_errors), ctx


def build_report(artifacts, events: pd.DataFrame, rules=None, alignment: list[dict] | None = None,
                 slos=None, on_stage=None) -> dict:
    from diagnosis.slo import evaluate_slos

    if rules is None:
        from rules.loader import load_rule_dirs
        rules = load_rule_dirs(None)
    stage = on_stage or _no_stage
    findings, rule_errors, ctx = evaluate(events, rules, on_stage)
    stage("clusters", STAGES["clusters"])
    findings, suppressed = clustering.apply_suppressions(findings)
    findings.sort(key=lambda f: (f.get("start_ts") or 0, -RANK.get(f["severity"], 0)))
    finding_ids = [f"F{i}" for i in range(1, len(findings) + 1)]
    groups = clustering.cluster_findings(findings)
    clusters = clustering.describe(groups, findings, finding_ids)
    cluster_of = {fid: c["id"] for c in clusters for fid in c["findings"]}
    stage("SLOs", STAGES["SLOs"])
    violations = evaluate_slos(ctx, findings, finding_ids, slos)

    out_findings = []
    for fid, f in zip(finding_ids, findings):
        consequence = f.get("consequence_of")
        out_findings.append({
            "id": fid,
            "rule_id": f["rule_id"],
            "rule_version": f.get("rule_version", 1),
            "title": f["title"],
            "severity": f["severity"],
            "root_cause": f.get("root_cause") or "",
            "slo": f.get("slo") or None,
            "cluster": cluster_of.get(fid),
            "start_ts": int(f.get("start_ts") or 0),
            "end_ts": int(f.get("end_ts") or f.get("start_ts") or 0),
            "explanation": f.get("explanation", ""),
            "recommendations": list(f.get("recommendations") or []),
            "references": list(f.get("references") or []),
            "evidence": list(f.get("evidence") or []),
            "metrics": _jsonable(f.get("metrics") or {}),
            "consequence_of": finding_ids[consequence] if consequence is not None else None,
        })
    span = _time_span(events)
    return {
        "version": REPORT_VERSION,
        "trace": {
            "artifacts": [a.to_report() for a in artifacts],
            "events": int(len(events)),
            "start_ts": span[0],
            "end_ts": span[1],
            "alignment": alignment or [],
            "series": _series(ctx),
            "hosts": _hosts(events),
        },
        "findings": out_findings,
        "violations": violations,
        "clusters": clusters,
        "rule_errors": rule_errors,
        "suppressed": suppressed,
        "summary": _summary(out_findings, violations),
    }


MAX_SERIES_POINTS = 5000
MAX_HOSTS = 200


def _hosts(events: pd.DataFrame) -> list[str]:
    """Hosts the events name (log prefixes, NVML samples, OTLP resources)."""
    if events.empty:
        return []
    hosts = distinct_text(events["host"])  # per distinct host, not per row
    return sorted(h for h in hosts if h and h not in ("-1", "nan"))[:MAX_HOSTS]


TELEMETRY = {"gpu.util": ("gpu_util_pct", 1.0), "mem.used": ("mem_used_gib", 1 / 2**30), "power": ("power_w", 1.0)}


def _series(ctx) -> dict:
    """Small time series the UI plots: per-step latency with cold-start and spike flags, and
    GPU telemetry (utilisation, memory used, power) per device."""
    out = {}
    try:
        steps = ctx.feature("decode_steps")
    except Exception:  # a plot is never worth failing the report
        steps = None
    if steps is not None and not steps.empty:
        steps = steps.iloc[:MAX_SERIES_POINTS]
        out["step_latency_ms"] = [
            {"ts": int(t), "step": int(i), "ms": round(float(v), 3), "cold": bool(c), "spike": bool(sp)}
            for t, i, v, c, sp in zip(steps["ts"], steps["step"], steps["value"], steps["cold"], steps["spike"])]
    telemetry = _telemetry(ctx.events)
    if telemetry:
        out["gpu_telemetry"] = telemetry
    return out


def _telemetry(events: pd.DataFrame) -> dict:
    """{device: {metric: [[ts, value], ...]}} from one source (NVML first, then nvidia-smi,
    DCGM), each metric evenly thinned to at most MAX_SERIES_POINTS points."""
    samples = events[(events["kind"] == "sample") & events["name"].isin(list(TELEMETRY))]
    for source in ("nvml", "nvidia_smi", "dcgm"):
        part = samples[samples["source"] == source]
        if not part.empty:
            break
    else:
        return {}
    out: dict = {}
    for (device, name), g in part.sort_values("ts").groupby(["device", "name"], observed=True):
        key, scale = TELEMETRY[str(name)]
        step = max(1, len(g) // MAX_SERIES_POINTS)
        g = g.iloc[::step]
        out.setdefault(str(int(device)), {})[key] = [[int(t), round(float(v) * scale, 3)]
                                                     for t, v in zip(g["ts"], g["value"])]
    return out


def _time_span(events: pd.DataFrame) -> tuple[int | None, int | None]:
    ts, dur = events["ts"].to_numpy(), events["dur"].to_numpy()
    timed = ts > 0
    if not timed.any():
        return None, None
    return int(ts[timed].min()), int((ts[timed] + dur[timed]).max())


def _summary(findings: list[dict], violations: list[dict]) -> dict:
    counts = {s: 0 for s in RANK}
    for f in findings:
        counts[f["severity"]] = counts.get(f["severity"], 0) + 1
    worst = max((f["severity"] for f in findings), key=lambda s: RANK.get(s, -1), default=None)
    return {"findings_by_severity": counts, "worst": worst, "violations": len(violations)}


def _jsonable(value):
    """numpy scalars and friends -> plain JSON types."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        try:
            return value.item()
        except (ValueError, TypeError):
            pass
    if isinstance(value, float) and value != value:
        return None
    return value
