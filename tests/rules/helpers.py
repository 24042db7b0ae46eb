"""Small event frames in the real schema, and rules written inline."""
from __future__ import annotations

import textwrap

import orjson
import pyarrow as pa

from ingest.engine.events import DEFAULTS, make_batch
from rules.engine.compiler import compile_rule
from rules.engine.evaluator import evaluate_rules
from rules.engine.features import TraceContext
from rules.engine.loader import load_rule_text

S = 1_000_000_000
MS = 1_000_000


def events(rows: list[dict]):
    """A DataFrame (as the pipeline gives it) from row dicts; attrs may be dicts."""
    keys = {k for r in rows for k in r}
    cols = {k: [r.get(k, DEFAULTS[k]) for r in rows] for k in keys}
    if "attrs" in cols:
        cols["attrs"] = [a if isinstance(a, str) else orjson.dumps(a).decode() for a in cols["attrs"]]
    return pa.Table.from_batches([make_batch(cols)]).to_pandas()


HEADER = """\
id: test.{name}
version: 1
title: Test rule {name}
status: experimental
severity: {severity}
"""


def rule_text(body: str, name: str = "rule", severity: str = "warning", explain: str = "{count} rows") -> str:
    text = HEADER.format(name=name, severity=severity) + textwrap.dedent(body).strip("\n") + "\n"
    if "explain:" not in body:
        text += f"explain: {orjson.dumps(explain).decode()}\n"
    return text


def run(body: str, frame, **kw):
    """Findings of one inline rule over a frame (raises on evaluation errors)."""
    rules = load_rule_text(rule_text(body, **kw), "test.yaml")
    findings, errors = evaluate_rules([compile_rule(r) for r in rules], TraceContext(frame))
    assert not errors, errors
    return findings


def count(body: str, frame) -> int:
    """Rows matched by a selection-only rule (0 when it does not fire)."""
    findings = run(body, frame)
    return findings[0].metrics["count"] if findings else 0
