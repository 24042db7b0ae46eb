"""Aggregates, groups, tumbling and sliding windows."""
import numpy as np
import pytest

from rules.engine.results import Evidence
from tests.rules.helpers import MS, S, events, run

DURS_MS = [10, 20, 30, 40, 100]


@pytest.fixture(scope="module")
def frame():
    rows = [{"ts": (i + 1) * S, "dur": d * MS, "kind": "kernel", "name": f"k{i % 2}", "host": "h1",
             "value": float(d), "attrs": {"bytes": d * 1024, "pg": str(i % 2)}} for i, d in enumerate(DURS_MS)]
    rows.append({"ts": 50 * S, "dur": 1 * MS, "kind": "kernel", "name": "k9", "host": "h2", "value": 1.0})
    return events(rows)


def one(body, frame):
    findings = run(body, frame)
    assert len(findings) == 1, findings
    return findings[0]


@pytest.mark.parametrize("expr, expected", [
    ("count", 5),
    ("sum(dur)", sum(DURS_MS) * MS),
    ("min(dur)", 10 * MS),
    ("max(value)", 100.0),
    ("mean(value)", float(np.mean(DURS_MS))),
    ("p50(value)", float(np.percentile(DURS_MS, 50))),
    ("p90(value)", float(np.percentile(DURS_MS, 90))),
    ("p95(value)", float(np.percentile(DURS_MS, 95))),
    ("p99(value)", float(np.percentile(DURS_MS, 99))),
    ("distinct(name)", 2),
    ("sum(attrs.bytes)", sum(DURS_MS) * 1024),
    ("distinct(attrs.pg)", 2),
    ("rate", 5 / (5 * S + 100 * MS - 1 * S) * 1e9),   # count per second over the group's span
])
def test_each_aggregate_is_computed(frame, expr, expected):
    fn = expr.split("(")[0]
    field = expr[len(fn) + 1:-1] if "(" in expr else None
    key = fn if field is None else f"{fn}_{field}"
    body = f"""
    match:
      sel: {{host: h1}}
    condition: sel
    aggregate:
      by: [host]
      having: {expr} >= 0
    explain: "{{metrics.{key}}}"
    """
    f = one(body, frame)
    assert f.metrics[key] == pytest.approx(expected)


@pytest.mark.parametrize("having, fires", [
    ("count >= 5", True), ("count > 5", False),
    ("max(dur) > 99ms and min(dur) < 11ms", True),
    ("max(dur) > 1s or count == 5", True),
    ("not (count == 5)", False),
    ("sum(dur) / count == 40ms", True),               # arithmetic
    ("first.name == 'k0' and last.value == 100", True),
    ("last.name != 'k0'", False),                      # rows 0, 2, 4 -> last is k0
    ("p99(value) - p50(value) > 60", True),
])
def test_having(frame, having, fires):
    body = f"match:\n  sel: {{host: h1}}\ncondition: sel\naggregate:\n  having: \"{having}\"\n"
    assert bool(run(body, frame)) == fires


def test_group_by_gives_one_finding_per_group(frame):
    body = "match:\n  sel: {kind: kernel}\ncondition: sel\naggregate:\n  by: [host, attrs.pg]\n"
    groups = sorted((f.group["host"], f.group["attrs.pg"], f.metrics["count"]) for f in run(body, frame))
    assert groups == [("h1", "0", 3), ("h1", "1", 2), ("h2", None, 1)]


def test_tumbling_windows_split_by_time(frame):
    # trace starts at 1s: windows [1s,3s) [3s,5s) [5s,7s) ... rows at 1,2 | 3,4 | 5 | 50
    body = "match:\n  sel: {kind: kernel}\ncondition: sel\naggregate:\n  window: 2s\n"
    counts = [f.metrics["count"] for f in run(body, frame)]
    assert counts == [2, 2, 1, 1]


def test_sliding_window_finds_bursts_that_straddle_tumbling_edges():
    # 3 errors at 1.8s, 2.1s, 2.4s: tumbling 1s windows split them 1 + 2; a sliding 1s window sees 3
    frame = events([{"ts": int(t * S), "kind": "error", "name": "E"} for t in (0.0, 1.8, 2.1, 2.4, 9.0)])
    base = "match:\n  sel: {kind: error}\ncondition: sel\naggregate:\n  window: 1s\n  having: count >= 3\n"
    assert run(base, frame) == []
    sliding = run(base + "  sliding: true\n", frame)
    assert len(sliding) == 1
    assert sliding[0].metrics["count"] == 3
    assert sliding[0].start_ts == int(1.8 * S) and sliding[0].end_ts == int(2.4 * S)


def test_overlapping_sliding_windows_merge_into_one_finding():
    frame = events([{"ts": i * 100 * MS, "kind": "error", "name": "E"} for i in range(30)])  # 3 s of errors
    body = "match:\n  sel: {kind: error}\ncondition: sel\naggregate:\n  window: 500ms\n  sliding: true\n  having: count >= 3\n"
    findings = run(body, frame)
    assert len(findings) == 1 and findings[0].metrics["count"] == 30


def test_a_million_buckets_window_is_refused_at_evaluation():
    from rules.engine.compiler import compile_rule
    from rules.engine.evaluator import evaluate_rules
    from rules.engine.features import TraceContext
    from rules.engine.loader import load_rule_text
    from tests.rules.helpers import rule_text
    frame = events([{"ts": 0, "kind": "error"}, {"ts": 1000 * S, "kind": "error"}])   # 1000 s / 1 ms = 1e6
    rules = load_rule_text(rule_text("match:\n  sel: {kind: error}\ncondition: sel\naggregate:\n  window: 1ms\n"))
    findings, errors = evaluate_rules([compile_rule(r) for r in rules], TraceContext(frame))
    assert findings == []
    assert "1,000,001 buckets" in errors[0]["error"] and "longer window" in errors[0]["error"]


def test_evidence_keeps_first_and_last_and_is_bounded():
    frame = events([{"ts": i * MS, "kind": "log", "name": "line", "loc": f"line {i + 1}",
                     "artifact": "app.log", "attrs": {"message": f"msg {i}"}} for i in range(100)])
    f = run("match:\n  sel: {kind: log}\ncondition: sel\n", frame)[0]
    assert len(f.evidence) == 20
    assert f.evidence[0] == Evidence(artifact="app.log", loc="line 1", ts=0, text="msg 0")
    assert f.evidence[-1].loc == "line 100" and f.evidence[-1].text == "msg 99"
    assert f.metrics["count"] == 100 and f.start_ts == 0 and f.end_ts == 99 * MS


def test_fingerprint_from_group_keys_and_first_row_attrs(frame):
    body = """
    match:
      sel: {host: h1}
    condition: sel
    aggregate: {by: [host]}
    fingerprint: [host, name, attrs.pg]
    """
    f = run(body, frame)[0]
    assert f.fingerprint == {"host": "h1", "name": "k0", "attrs.pg": "0"}
