"""Isolation of failing/slow rules, features (from:), and the time budget."""
import numpy as np
import pandas as pd
import pytest

from ingest.engine.trace_frame import as_event_frame
from rules.engine import budget, features
from rules.engine.compiler import compile_rule
from rules.engine.evaluator import evaluate_rules
from rules.engine.features import TraceContext, feature, list_features
from rules.engine.loader import load_rule_text
from tests.rules.helpers import MS, S, events, rule_text, run

CALLS = []


@feature("test_exploding", doc="Raises: used to prove one failing rule does not stop the others.")
def _exploding(ctx):
    raise RuntimeError("boom")


@feature("test_slow_steps", doc="Steps slower than 5 ms, with an extra numeric column `ms` (test only).")
def _slow_steps(ctx):
    CALLS.append(1)
    ev = ctx.events
    steps = ev[ev["name"] == "step"]
    out = steps[steps["dur"] > 5 * MS][["ts", "dur", "host", "attrs"]].copy()
    out["ms"] = out["dur"] / 1e6
    return out


@pytest.fixture
def frame():
    return events([{"ts": i * S, "dur": d * MS, "kind": "annotation", "name": "step", "host": "h"}
                   for i, d in enumerate([1, 10, 2, 20])] + [{"ts": 9 * S, "kind": "error", "name": "Boom"}])


def compiled(*bodies):
    return [compile_rule(load_rule_text(rule_text(b, name=f"r{i}"))[0]) for i, b in enumerate(bodies)]


def test_a_rule_that_raises_does_not_stop_the_others(frame):
    rules = compiled("match:\n  a: {from: test_exploding, value|gt: 1}\ncondition: a\n",
                     "match:\n  a: {kind: error}\ncondition: a\n",
                     "match:\n  a: {from: test_exploding, value|gt: 2}\ncondition: a\n")
    findings, errors = evaluate_rules(rules, TraceContext(frame))
    assert [f.rule_id for f in findings] == ["test.r1"]
    assert [e["rule_id"] for e in errors] == ["test.r0", "test.r2"]
    assert "feature 'test_exploding' failed: RuntimeError: boom" in errors[0]["error"]


def test_a_rule_over_its_time_budget_is_aborted_and_reported(frame, monkeypatch):
    rules = compiled("match:\n  a: {kind: error}\ncondition: a\n", "match:\n  a: {kind: annotation}\ncondition: a\n")
    clock = iter([0.0, 100.0] + [100.0] * 50 + [200.0, 200.0] + [200.0] * 50)
    monkeypatch.setattr(budget.time, "perf_counter", lambda: next(clock))
    findings, errors = evaluate_rules(rules[:1], TraceContext(frame), time_budget_s=5)
    assert findings == []
    assert errors[0]["rule_id"] == "test.r0"
    assert errors[0]["error"].startswith("aborted: evaluation exceeded its time budget of 5s while")


def test_features_are_selected_from_and_computed_once_per_trace(frame):
    CALLS.clear()
    ctx = TraceContext(frame)
    rules = compiled("match:\n  a: {from: test_slow_steps, ms|gt: 15}\ncondition: a\nexplain: '{first.ms} ms on {first.host}'\n",
                     "match:\n  a: {from: test_slow_steps}\ncondition: a\naggregate:\n  by: [host]\n  having: max(ms) > 5\n")
    findings, errors = evaluate_rules(rules, ctx)
    assert errors == []
    assert findings[0].explanation == "20 ms on h" and findings[1].metrics["count"] == 2
    assert len(CALLS) == 1


def test_list_features_documents_every_feature():
    names = {f["name"]: f["doc"] for f in list_features()}
    assert "Steps slower than 5 ms" in names["test_slow_steps"]
    assert all(doc for doc in names.values())


def test_as_event_frame_fills_and_types_missing_columns():
    df = as_event_frame(pd.DataFrame({"ts": [5], "name": ["x"], "extra": [1.5]}))
    assert df["dur"].tolist() == [0] and df["pid"].tolist() == [-1] and df["attrs"].tolist() == ["{}"]
    assert isinstance(df["name"].dtype, pd.CategoricalDtype) and df["extra"].tolist() == [1.5]
    assert len(as_event_frame(None)) == 0


@pytest.mark.parametrize("found", [
    None, pd.DataFrame(), pd.DataFrame({"ts": [5], "name": ["x"], "extra": [1.5]}),
    pd.DataFrame({"ts": [5.0], "dur": ["7"], "device": [1], "attrs": ["{}"], "name": pd.Categorical(["k"])}),
], ids=["none", "no columns", "some columns", "odd types"])
def test_a_feature_that_finds_nothing_has_the_columns_and_types_of_one_that_finds_rows(found):
    """No rows take a shortcut (the typed empty columns made once): the same columns and types."""
    empty = as_event_frame(None if found is None else found.iloc[:0])
    some = as_event_frame(pd.DataFrame({"ts": [1]}) if found is None or found.empty else found)
    assert len(empty) == 0 and list(empty.columns) == list(some.columns)
    assert empty.dtypes.map(str).to_dict() == some.dtypes.map(str).to_dict()
    assert empty.index.equals(pd.RangeIndex(0))


@pytest.mark.parametrize("rows", [0, 3])
def test_an_event_frame_already_is_passed_on_over_the_same_columns(rows):
    """A frame with the event columns, their types and rows 0..n-1 (what features build from
    the events) is not made again: a new frame over the same column data."""
    typed = as_event_frame(pd.DataFrame({"ts": list(range(rows)), "extra": [1.5] * rows}))
    again = as_event_frame(typed)
    assert again is not typed and list(again.columns) == list(typed.columns)
    assert np.shares_memory(again["ts"].to_numpy(), typed["ts"].to_numpy()) or rows == 0
    again["added"] = 1  # the caller's frame is not changed by the new one's columns
    assert "added" not in typed.columns
    shifted = typed.set_axis(pd.RangeIndex(1, rows + 1))  # rows not numbered from 0: renumbered
    assert as_event_frame(shifted).index.equals(pd.RangeIndex(rows))


def test_feature_cycles_are_reported():
    @feature("test_cycle", doc="Depends on itself (test only).")
    def _cycle(ctx):
        return ctx.feature("test_cycle")
    with pytest.raises(features.FeatureError, match="depends on itself"):
        TraceContext(events([{"ts": 0}])).feature("test_cycle")


def test_missing_feature_column_is_an_error_only_when_rows_exist(frame):
    rules = compiled("match:\n  a: {from: test_slow_steps, nope|gt: 1}\ncondition: a\n")
    _, errors = evaluate_rules(rules, TraceContext(frame))
    assert "no column 'nope'" in errors[0]["error"]
    findings, errors = evaluate_rules(rules, TraceContext(events([{"ts": 0, "name": "other"}])))
    assert (findings, errors) == ([], [])


def test_findings_carry_the_rule_metadata(frame):
    body = """
    root_cause: host.sync_stall
    slo: step_time
    tags: [latency]
    causes: [latency.jitter]
    suppresses: [gpu.idle_gaps]
    references: [https://example.org/x]
    match:
      a: {kind: error}
    condition: a
    """
    f = run(body, frame, severity="error")[0]
    assert {k: getattr(f, k) for k in ("rule_id", "rule_version", "title", "severity", "root_cause", "slo", "tags",
                                         "causes", "suppresses", "references")} == {
        "rule_id": "test.rule", "rule_version": 1, "title": "Test rule rule", "severity": "error",
        "root_cause": "host.sync_stall", "slo": "step_time", "tags": ("latency",), "causes": ("latency.jitter",),
        "suppresses": ("gpu.idle_gaps",), "references": ("https://example.org/x",)}
