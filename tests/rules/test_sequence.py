"""Sequences: A then B within W on the same keys; A not followed by B."""
from tests.rules.helpers import MS, S, events, run

SEQ = """
match:
  alloc_fail: {kind: error, name: AllocFailed}
  abort: {kind: error, name: CaptureAborted}
sequence:
  steps: [alloc_fail, abort]
  within: 2s
  by: [host, pid]
explain: "{alloc_fail.name} on {host} then {abort.name} after {metrics.elapsed_ms:.0f} ms"
"""


def ev(t, name, pid=1, host="h"):
    return {"ts": int(t * S), "kind": "error", "name": name, "host": host, "pid": pid}


def test_a_then_b_within_on_the_same_keys():
    frame = events([ev(1, "AllocFailed"), ev(1.5, "CaptureAborted"),          # match (pid 1)
                    ev(5, "AllocFailed", pid=2), ev(8, "CaptureAborted", pid=2),   # too late
                    ev(10, "AllocFailed", pid=3), ev(10.1, "CaptureAborted", pid=4)])  # other key
    findings = run(SEQ, frame)
    assert len(findings) == 1
    f = findings[0]
    assert f.group == {"host": "h", "pid": 1}
    assert (f.start_ts, f.end_ts) == (1 * S, int(1.5 * S))
    assert f.explanation == "AllocFailed on h then CaptureAborted after 500 ms"


def test_order_matters():
    frame = events([ev(1, "CaptureAborted"), ev(1.5, "AllocFailed")])
    assert run(SEQ, frame) == []


def test_several_starts_reaching_one_end_give_one_match():
    frame = events([ev(1, "AllocFailed"), ev(1.2, "AllocFailed"), ev(1.5, "CaptureAborted")])
    findings = run(SEQ, frame)
    assert len(findings) == 1 and findings[0].start_ts == int(1.2 * S)


def test_three_steps():
    body = """
    match:
      a: {name: A}
      b: {name: B}
      c: {name: C}
    sequence: {steps: [a, b, c], within: 1s}
    """
    frame = events([{"ts": t * 100 * MS, "name": n} for t, n in [(1, "A"), (2, "C"), (3, "B"), (4, "C"), (30, "A"), (31, "B")]])
    findings = run(body, frame)
    assert len(findings) == 1 and [e.text for e in findings[0].evidence] == ["A", "B", "C"]


def test_absent_step_a_not_followed_by_b():
    body = """
    match:
      start: {name: ncclAllReduce_start}
      done: {name: ncclAllReduce_end}
    sequence: {steps: [start], absent: done, within: 1s, by: [pid]}
    explain: "{count} collective(s) on pid {pid} never finished"
    """
    frame = events([{"ts": 1 * S, "name": "ncclAllReduce_start", "pid": 1}, {"ts": int(1.2 * S), "name": "ncclAllReduce_end", "pid": 1},
                    {"ts": 2 * S, "name": "ncclAllReduce_start", "pid": 2},
                    {"ts": 3 * S, "name": "ncclAllReduce_start", "pid": 2}, {"ts": 9 * S, "name": "ncclAllReduce_end", "pid": 2}])
    findings = run(body, frame)
    assert len(findings) == 1
    assert findings[0].explanation == "2 collective(s) on pid 2 never finished"
