"""Helpers the acceptance tests share."""
from diagnosis.severity import RANK


def by_root(report: dict) -> dict[str, str]:
    """Root-cause key -> the highest severity any finding with that key carries."""
    out: dict[str, str] = {}
    for f in report["findings"]:
        key = f["root_cause"]
        if key not in out or RANK[f["severity"]] > RANK[out[key]]:
            out[key] = f["severity"]
    return out
