"""The time allowance of one rule's evaluation."""
from __future__ import annotations

import time


class RuleTimeout(RuntimeError):
    pass


class Budget:
    """Wall-clock allowance of one rule, checked between vectorized steps."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.deadline = time.perf_counter() + seconds

    def check(self, step: str) -> None:
        if time.perf_counter() > self.deadline:
            raise RuleTimeout(f"aborted: evaluation exceeded its time budget of {self.seconds:g}s while {step}")
