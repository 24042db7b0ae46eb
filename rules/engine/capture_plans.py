"""The capture that would decide a finding: a rule's `capture:` block, typed.

    capture:
      kind: profiler            # profiler | flight_recorder | memory_snapshot | nvml_burst | ebpf
      trigger: slow_step        # when the program-side hook takes it (TRIGGERS)
      steps: 20                 # profiler window, in the program's steps
      factor: 1.5               # slow_step: a step this many times the running median
      stall_s: 60               # stalled_step: no step for this long
      duration_s: 30            # nvml_burst, ebpf: window length
      max_bytes: 64MiB          # the capture is cut (or dropped) past this
      wait_s: 3600              # how long the hook waits for the occurrence before giving up
      scope: involved           # involved: the hosts the finding names; all: every host of the trace
      unless: [kineto]          # no plan when the trace already holds one of these formats
      why: a profiler window around the next spike shows what the slow step does

A plan is a description, not an action: hosts.closed_loop turns it into a capture order when
the team's policy allows it. Every bound has a ceiling here, so a team rule cannot ask an
agent for an unbounded capture.
"""
from __future__ import annotations

from typing import Any, Mapping

import msgspec

from rules.engine.quantities import parse_size

KINDS = ("profiler", "flight_recorder", "memory_snapshot", "nvml_burst", "ebpf")
# the kinds the agent takes itself for `duration_s` (no program hook): NVML at 100 Hz, and an
# eBPF window of where the host threads of CUDA programs wait (where the agent may trace)
TIMED_KINDS = ("nvml_burst", "ebpf")
# now: at once; slow_step: the next step above `factor` x the running median of step times;
# stalled_step: the program's step loop made no progress for `stall_s` (a hang in a collective);
# oom: the next CUDA out-of-memory (memory history is recorded while armed)
TRIGGERS = ("now", "slow_step", "stalled_step", "oom")
TRIGGERS_OF_KIND = {"profiler": ("now", "slow_step"), "flight_recorder": ("now", "stalled_step"),
                    "memory_snapshot": ("now", "oom"), "nvml_burst": ("now",), "ebpf": ("now",)}
SCOPES = ("involved", "all")

# ceilings: what any rule may ask of a host
MAX_STEPS = 200
MAX_BYTES = 256 * 1024 * 1024
MAX_DURATION_S = 300.0
MAX_WAIT_S = 7 * 24 * 3600.0
MAX_STALL_S = 3600.0


class CapturePlanError(ValueError):
    """A `capture:` block that is not a plan; the message names the key and what was expected."""


class CapturePlan(msgspec.Struct, frozen=True, kw_only=True):
    """As the report lists it (`Finding.capture`): the plan's keys, then `summary`, its one line
    for people (derived from the others; a value read back is recomputed)."""
    kind: str
    trigger: str = "now"
    steps: int = 20
    factor: float = 1.5
    stall_s: float = 60.0
    duration_s: float = 30.0
    max_bytes: int = 64 * 1024 * 1024
    wait_s: float = 24 * 3600.0
    scope: str = "involved"
    unless: tuple[str, ...] = ()
    why: str = ""
    summary: str = ""

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "summary", self._summary())

    def to_dict(self) -> dict:
        """The plan as a capture order stores it (its keys, without the derived summary)."""
        plan = msgspec.json.decode(msgspec.json.encode(self))
        del plan["summary"]
        return plan

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CapturePlan":
        return msgspec.convert(d, cls, strict=False)

    def occasion(self) -> str:
        """When the program-side hook takes it, in words."""
        return {"now": "at once", "slow_step": f"at the next step over {self.factor:g}x the running median",
                "stalled_step": f"when the step loop makes no progress for {self.stall_s:g} s",
                "oom": "at the next CUDA out-of-memory"}[self.trigger]

    def _summary(self) -> str:
        """One line for people: what, when, how much."""
        when = self.occasion()
        size = f"{self.steps} step(s)" if self.kind == "profiler" else \
            f"{self.duration_s:g} s" if self.kind in TIMED_KINDS else ""
        what = self.kind.replace("_", " ")
        return f"{what}{f' of {size}' if size else ''} {when}, at most {self.max_bytes // (1024 * 1024)} MiB"


PLAN_KEYS = tuple(k for k in CapturePlan.__struct_fields__ if k != "summary")
_DEFAULTS = CapturePlan(kind="profiler")


def parse_plan(raw: Any) -> CapturePlan:
    """A rule's `capture:` value -> CapturePlan, or CapturePlanError naming what is wrong."""
    if not isinstance(raw, Mapping):
        raise CapturePlanError("capture: expected a mapping (kind, trigger, ...)")
    unknown = sorted(set(raw) - set(PLAN_KEYS))
    if unknown:
        raise CapturePlanError(f"capture: unknown key(s) {', '.join(unknown)}")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise CapturePlanError(f"capture.kind: expected one of {', '.join(KINDS)}; got {kind!r}")
    trigger = raw.get("trigger", "now")
    if trigger not in TRIGGERS_OF_KIND[kind]:
        raise CapturePlanError(f"capture.trigger: a {kind} capture takes one of "
                               f"{', '.join(TRIGGERS_OF_KIND[kind])}; got {trigger!r}")
    scope = raw.get("scope", "involved")
    if scope not in SCOPES:
        raise CapturePlanError(f"capture.scope: expected one of {', '.join(SCOPES)}; got {scope!r}")
    unless = raw.get("unless", ())
    if not isinstance(unless, (list, tuple)) or not all(isinstance(u, str) for u in unless):
        raise CapturePlanError("capture.unless: expected a list of artifact formats")
    why = raw.get("why", "")
    if not isinstance(why, str):
        raise CapturePlanError("capture.why: expected text")
    max_bytes = raw.get("max_bytes", _DEFAULTS.max_bytes)
    try:
        max_bytes = parse_size(max_bytes) if isinstance(max_bytes, str) else int(max_bytes)
    except (TypeError, ValueError):
        raise CapturePlanError(f"capture.max_bytes: expected a size such as 64MiB; got {max_bytes!r}") from None
    return CapturePlan(
        kind=kind, trigger=trigger, scope=scope, unless=tuple(unless), why=why.strip(),
        steps=int(_bounded(raw, "steps", _DEFAULTS.steps, 1, MAX_STEPS)),
        factor=_bounded(raw, "factor", _DEFAULTS.factor, 1.05, 100.0),
        stall_s=_bounded(raw, "stall_s", _DEFAULTS.stall_s, 1.0, MAX_STALL_S),
        duration_s=_bounded(raw, "duration_s", _DEFAULTS.duration_s, 1.0, MAX_DURATION_S),
        max_bytes=int(_within("max_bytes", max_bytes, 1024, MAX_BYTES)),
        wait_s=_bounded(raw, "wait_s", _DEFAULTS.wait_s, 10.0, MAX_WAIT_S))


def _bounded(raw: Mapping, key: str, default: float, low: float, high: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CapturePlanError(f"capture.{key}: expected a number; got {value!r}")
    return _within(key, float(value), low, high)


def _within(key: str, value: float, low: float, high: float) -> float:
    if not low <= value <= high:
        raise CapturePlanError(f"capture.{key}: expected {low:g} to {high:g}; got {value:g}")
    return value
