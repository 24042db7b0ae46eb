"""Severity order shared by the report, the CLI's --fail-on and the UI."""
SEVERITIES = ("info", "warning", "error", "critical")
RANK = {s: i for i, s in enumerate(SEVERITIES)}


def at_least(severity: str, threshold: str) -> bool:
    return RANK.get(severity, -1) >= RANK[threshold]


def highest(severities) -> str:
    return max(severities, key=lambda s: RANK.get(s, -1), default="info")
