"""Bounds on untrusted rules: what a rule file may contain and what one rule may cost.

Rules are written by teams and uploaded through the API, so every dimension an author
controls is capped here, in one place, with the reason next to the number.
"""
from __future__ import annotations

MAX_RULE_FILE_BYTES = 256 * 1024
"""A rule file larger than this is refused before YAML parsing (the builtin pack's largest
file is a few KiB; a 10 MB "rule" is an attack or an accident)."""

MAX_DOCUMENTS_PER_FILE = 200
"""Rules (YAML documents) in one file."""

MAX_YAML_DEPTH = 16
"""Nesting of YAML mappings/sequences. A rule needs about 5 levels; deep nesting only
serves to exhaust the recursive constructor."""

MAX_YAML_NODES = 20_000
"""Scalars + collections in one file, counted while parsing (YAML aliases are refused
outright, so this also bounds the constructed document)."""

MAX_REGEX_LENGTH = 1_000
"""Characters in one `|re` pattern."""

RE2_MAX_MEM = 8 * 1024 * 1024
"""Bytes RE2 may use to compile one pattern (re2.Options.max_mem); larger programs fail
to compile and are reported at load time."""

MAX_RE2_PROGRAM_SIZE = 20_000
"""RE2 program instructions of one pattern: huge counted repetitions are refused even
when they fit max_mem, because they make every match slower."""

MAX_VALUES_PER_FIELD = 1_000
"""Items of a list value (`name: [a, b, ...]`, `|in`)."""

MAX_SELECTIONS = 64
"""Named selections under `match`."""

MAX_CONDITION_LENGTH = 2_000
"""Characters of `condition` and of `aggregate.having`."""

MAX_CONDITION_DEPTH = 32
"""Nesting of parentheses / not / and / or in `condition` and `having`."""

MAX_TEMPLATE_LENGTH = 4_000
"""Characters of `explain` and of each `recommend` item."""

MAX_RENDERED_VALUE = 300
"""Characters of one placeholder's rendered value: values come from traces (untrusted)."""

MIN_WINDOW_NS = 1_000_000
"""Smallest `aggregate.window` / `sequence.within`: 1 ms. Checked at load."""

MAX_WINDOWS = 100_000
"""Tumbling buckets a window may create over the trace span (checked at evaluation,
when the span is known): a 1 ms window over a 10 minute trace is refused, not run."""

MAX_SLIDING_WINDOWS = 200_000
"""Candidate windows (one per matching event) a sliding aggregate evaluates."""

MAX_SEQUENCE_STEPS = 8
"""Steps of a `sequence`."""

MAX_FINDINGS_PER_RULE = 200
"""Findings one rule may produce per trace; the rest are counted in the last finding's
metrics (`truncated`), so a noisy rule cannot flood the report."""

MAX_EVIDENCE = 20
"""Evidence rows per finding (always including the first and the last match)."""

RULE_TIME_BUDGET_S = 10.0
"""Evaluation time of one rule, checked between steps (each step is vectorized and
bounded by the limits above). A rule over budget is aborted and reported in errors."""
