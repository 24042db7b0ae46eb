"""How far along a trace is, as one number for a progress bar: the bytes of the upload read
while parsing, then the stages of the diagnosis. Shared by the web page, the API and the
CLI's bar; nothing heavy is imported here (the web process reads it on every poll).

The shares are measured on Kineto traces (parsing ~70% of the work, then loading the events,
features, rules, clusters, SLOs); a progress bar, not a promise.
"""
from __future__ import annotations

PARSE_SHARE = 0.7

# Stage of a diagnosis -> the share of the diagnosis done when it starts.
DIAGNOSIS_STAGES = {"events": 0.0, "features": 0.45, "rules": 0.8, "clusters": 0.93, "SLOs": 0.95}


def overall_done(bytes_done: int, bytes_total: int, diagnosis_done: float | None = None) -> float:
    """0..1: bytes read while parsing (`diagnosis_done` None), then the diagnosis's share."""
    if diagnosis_done is not None:
        return PARSE_SHARE + (1 - PARSE_SHARE) * min(max(diagnosis_done, 0.0), 1.0)
    if not bytes_total:
        return 0.0
    return PARSE_SHARE * min(max(bytes_done, 0), bytes_total) / bytes_total
