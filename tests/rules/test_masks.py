"""Row sets of tests, selections and conditions: the same rows as a plain boolean evaluation,
no work for what the trace cannot contain, and tests shared by rules computed once."""
import json

import numpy as np
import pytest

from rules.engine import modifiers
from rules.engine.budget import Budget
from rules.engine.compiler import compile_rule
from rules.engine.evaluator import evaluate_rules
from rules.engine.expressions import parse_condition
from rules.engine.features import TraceContext
from rules.engine.loader import load_rule_text
from rules.engine.masks import ALL, TableMasks
from tests.rules.helpers import S, events, rule_text


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(7)
    kinds, names = ["kernel", "runtime", "cpu_op", "log"], ["gemm_a", "gemm_b", "copy", "nccl:ar", "other"]
    return events([{"ts": int(i * S // 10), "dur": int(rng.integers(0, 5_000_000)), "kind": kinds[rng.integers(4)],
                    "name": names[rng.integers(5)], "pid": int(rng.integers(3)), "attrs": {"n": int(rng.integers(10))}}
                   for i in range(3000)])


def compiled(body: str):
    return compile_rule(load_rule_text(rule_text(body), "t.yaml")[0])


SELECTIONS = """
match:
  gemm: {kind: kernel, name|startswith: gemm}
  slow: {dur|gte: 2ms}
  early: {pid: [0, 1], attrs.n|lt: 5}
  logs: [{kind: log}, {name: copy, pid: 2}]
"""


@pytest.mark.parametrize("condition, expected", [
    ("gemm", lambda m, hits: m["gemm"]),
    ("gemm and slow", lambda m, hits: m["gemm"] & m["slow"]),
    ("gemm or logs", lambda m, hits: m["gemm"] | m["logs"]),
    ("not slow", lambda m, hits: ~m["slow"]),
    ("slow and not (gemm or early)", lambda m, hits: m["slow"] & ~(m["gemm"] | m["early"])),
    ("2 of them", lambda m, hits: hits >= 2),
    ("all of them", lambda m, hits: hits == 4),
    ("any of them and not logs", lambda m, hits: (hits >= 1) & ~m["logs"]),
    ("early or not early", lambda m, hits: m["early"] | ~m["early"]),
])
def test_rows_are_those_a_boolean_evaluation_gives(frame, condition, expected):
    ev = frame
    n = ev["attrs"].map(lambda a: json.loads(a)["n"])
    masks = {"gemm": (ev["kind"] == "kernel") & ev["name"].str.startswith("gemm"),
             "slow": ev["dur"] >= 2_000_000,
             "early": ev["pid"].isin([0, 1]) & (n < 5),
             "logs": (ev["kind"] == "log") | ((ev["name"] == "copy") & (ev["pid"] == 2))}
    m = {k: v.to_numpy(dtype=bool) for k, v in masks.items()}
    want = expected(m, sum(v.astype(int) for v in m.values()))
    cr = compiled(SELECTIONS + "condition: any of them\n")
    node = parse_condition(condition, list(cr.selections))
    rows = TableMasks(TraceContext(frame).events).condition(node, cr.selections, ALL, Budget(10))
    assert rows.tolist() == np.flatnonzero(want).tolist()


def test_a_selection_of_an_absent_kind_costs_no_further_test(frame, monkeypatch):
    def fail(*a):
        raise AssertionError("tested rows of a kind the trace does not have")
    monkeypatch.setattr(modifiers.Regex, "mask_strings", fail)
    monkeypatch.setattr(modifiers.Regex, "mask_categories", fail)
    monkeypatch.setattr(modifiers.GreaterOrEqual, "mask_values", fail)
    cr = compiled("match:\n  a: {kind: oom, name|re: 'x+', attrs.n|gte: 1}\ncondition: a\n")
    findings, errors = evaluate_rules([cr], TraceContext(frame))
    assert findings == [] and errors == []


def test_a_test_shared_by_rules_is_computed_once_per_evaluation(frame, monkeypatch):
    calls = []
    real = modifiers.Equals.mask_categories

    def spy(self, test, categories):
        calls.append(test.key)
        return real(self, test, categories)
    monkeypatch.setattr(modifiers.Equals, "mask_categories", spy)
    rules = [compiled("match:\n  a: {kind: kernel, dur|gte: 1ms}\ncondition: a\n"),
             compiled("match:\n  a: {kind: kernel}\ncondition: a\naggregate:\n  by: [pid]\n")]
    findings, errors = evaluate_rules(rules, TraceContext(frame))
    assert not errors and len(findings) == 4
    assert calls == ["kind"]
