"""Warnings about a valid rule: what a reviewer would point out that does not refuse the rule
(it loads and runs as written). Each validator is a function of the loaded Rule, registered
by name, returning its messages; `tracedoc rules validate` prints them after the errors and
they never change its exit status.

    @validator("no-fires-test")
    def _no_fires_test(rule: Rule) -> list[str]: ...
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable

from rules.engine.rule import Rule

Validator = Callable[[Rule], list[str]]

_VALIDATORS: dict[str, Validator] = {}


@dataclass(frozen=True)
class RuleWarning:
    file: str
    line: int
    validator: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:1: warning: {self.message} [{self.validator}]"


def validator(name: str) -> Callable[[Validator], Validator]:
    """Register `fn(rule) -> [message]` as the validator `name` (what a warning ends with)."""
    def register(fn: Validator) -> Validator:
        if name in _VALIDATORS and _VALIDATORS[name] is not fn:
            raise ValueError(f"rule validator {name!r} is registered twice")
        _VALIDATORS[name] = fn
        return fn
    return register


def validator_names() -> list[str]:
    return sorted(_VALIDATORS)


def rule_warnings(rules: Iterable[Rule]) -> list[RuleWarning]:
    """Every registered validator's warnings for each rule, in rule order, at the rule's line."""
    return [RuleWarning(rule.file, rule.line, name, message)
            for rule in rules for name, check in _VALIDATORS.items() for message in check(rule)]


@validator("no-fires-test")
def _no_fires_test(rule: Rule) -> list[str]:
    if rule.tests.get("fires"):
        return []
    return [f"rule {rule.id!r} names no scenario under tests: fires, so `tracedoc rules test` never shows it firing"]


_LISTS = ("tags", "references", "causes", "suppresses", "recommend", "fingerprint")


@validator("repeated-entry")
def _repeated_entry(rule: Rule) -> list[str]:
    out: list[str] = []
    for key in _LISTS:
        values = getattr(rule, key)
        counts = Counter(v for v in values if isinstance(v, str))
        out.extend(f"{key} lists {value!r} {n} times" for value, n in counts.items() if n > 1)
    return out


@validator("same-selection-twice")
def _same_selection_twice(rule: Rule) -> list[str]:
    """Two selections with the same spec: one of them is likely meant to differ."""
    first: dict[str, str] = {}
    out: list[str] = []
    for name, spec in rule.match.items():
        key = json.dumps(spec, sort_keys=True, default=str)  # the same spec written in another order too
        if key in first:
            out.append(f"selection {name!r} is the same as {first[key]!r}")
        else:
            first[key] = name
    return out
