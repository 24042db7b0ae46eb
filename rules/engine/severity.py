"""Severities of a rule and its findings, lowest first: the one definition the rule schema's
check, the report, the CLI's --fail-on, the models and the UI all read."""
from __future__ import annotations

from typing import Iterable

SEVERITIES = ("info", "warning", "error", "critical")
RANK = {s: i for i, s in enumerate(SEVERITIES)}
MOST_SEVERE_FIRST = tuple(reversed(SEVERITIES))


def at_least(severity: str, threshold: str) -> bool:
    return RANK.get(severity, -1) >= RANK[threshold]


def highest(severities: Iterable[str]) -> str:
    return max(severities, key=lambda s: RANK.get(s, -1), default="info")
