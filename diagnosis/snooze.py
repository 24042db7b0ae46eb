"""Snooze presets in plain words, as an on-call person picks them: ignore an issue for an
hour, until tomorrow, for a week, or until it happens N more times. Each resolves to the
cluster's snooze fields (until a time, until a total trace count)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class SnoozePreset:
    key: str
    words: str             # what the button says
    delay: timedelta


SNOOZE_PRESETS = (
    SnoozePreset("1h", "for 1 hour", timedelta(hours=1)),
    SnoozePreset("tomorrow", "until tomorrow", timedelta(days=1)),
    SnoozePreset("1w", "for 1 week", timedelta(weeks=1)),
)
PRESETS = {p.key: p for p in SNOOZE_PRESETS}


@dataclass(frozen=True)
class Snooze:
    until: datetime | None
    count: int | None      # ignored until seen in this many traces in all

    def describe(self) -> str:
        if self.count is not None:
            return f"until it is seen in {self.count} traces"
        return f"until {self.until:%b %-d %H:%M}" if self.until else "indefinitely"


def resolve(preset: str, more: int | None, trace_count: int, now: datetime) -> Snooze:
    """A preset ("1h", "tomorrow", "1w") or `more` occurrences, as the snooze fields.
    "Until it happens N more times" counts from the traces the cluster has now."""
    if more:
        return Snooze(until=None, count=trace_count + more)
    return Snooze(until=now + PRESETS[preset].delay, count=None)
