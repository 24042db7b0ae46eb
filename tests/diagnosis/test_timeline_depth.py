"""Host calls' call depth on the timeline (`nesting_depth`, numpy) against a plain stack walk,
on random properly nested calls of several threads, on zero-length events at a call's start,
and on the corpus's big trace, whose thread lanes become one lane per depth."""
import numpy as np

from diagnosis.engine.pipeline import run
from diagnosis.engine.timeline.export import chrome_trace
from diagnosis.engine.timeline.index import MAX_DEPTH, build_index, nesting_depth
from tests.corpus import corpus


def stack_depth(thread, ts, end) -> list[int]:
    """Reference: walk each thread's calls by start (longest first), keep the open ones."""
    out = [0] * len(ts)
    stacks: dict[int, list[int]] = {}
    for i in sorted(range(len(ts)), key=lambda i: (thread[i], ts[i], -end[i])):
        stack = stacks.setdefault(thread[i], [])
        while stack and stack[-1] <= ts[i]:
            stack.pop()
        out[i] = len(stack)
        stack.append(end[i])
    return out


def nested_calls(rng, start, stop, depth, out):
    """Calls inside [start, stop): siblings one after another, each with children inside it."""
    at = start
    while depth < 7 and at < stop - 1:
        s = int(rng.integers(at, stop))
        e = int(rng.integers(s, stop + 1))   # zero-length calls too
        out.append((s, e))
        nested_calls(rng, s, e, depth + 1, out)
        at = e + int(rng.integers(0, 3))


def test_random_nested_calls_of_several_threads_match_a_stack_walk():
    rng = np.random.default_rng(7)
    thread, ts, end = [], [], []
    for t in range(4):
        calls: list[tuple[int, int]] = []
        nested_calls(rng, 0, 20_000, 0, calls)
        thread += [t] * len(calls)
        ts += [c[0] for c in calls]
        end += [c[1] for c in calls]
    order = rng.permutation(len(ts))   # any input order
    thread, ts, end = (np.array(x, np.int64)[order] for x in (thread, ts, end))
    got = nesting_depth(thread, ts, end)
    assert len(ts) > 200 and got.max() >= 3
    assert got.tolist() == stack_depth(thread.tolist(), ts.tolist(), end.tolist())


def test_zero_length_events_at_a_calls_start_sit_inside_it():
    # a call [10, 50), an instant at 10 (inside it), another instant at 10, a call [10, 20)
    ts = np.array([10, 10, 10, 10, 50], np.int64)
    end = np.array([50, 10, 10, 20, 50], np.int64)
    got = nesting_depth(np.zeros(5, np.int64), ts, end)
    assert got.tolist() == [0, 2, 2, 1, 0]
    assert got.tolist() == stack_depth([0] * 5, ts.tolist(), end.tolist())


def big_index():
    captured = {}
    report = run([corpus("h200", "healthy_decode")], on_events=lambda events: captured.setdefault("e", events))
    return build_index(captured["e"], report)


def test_the_big_traces_thread_becomes_one_lane_per_depth():
    index = big_index()
    cpu = [lane for lane in index.lanes if lane.group == "cpu"]
    main = max((lane for lane in cpu if lane.depth == 0), key=lambda lane: index.events_in(lane.id))
    depths = [lane for lane in cpu if lane.path == main.path]
    assert [lane.depth for lane in depths] == list(range(len(depths))) and 3 <= len(depths) <= MAX_DEPTH
    assert depths[1].label == f"{main.path[-1]} · depth 1"
    # every call on depth d > 0 lies inside a call of depth d - 1 (the flame chart holds)
    for upper, lower in zip(depths, depths[1:]):
        up, low = index.lane_slice(upper.id), index.lane_slice(lower.id)
        starts, ends = index.ts[up], index.end[up]
        for t, e in zip(index.ts[low].tolist(), index.end[low].tolist()):
            k = int(np.searchsorted(starts, t, side="right")) - 1
            assert k >= 0 and starts[k] <= t and ends[k] >= e, (lower.depth, t, e)


def test_the_perfetto_export_folds_the_depth_lanes_back_into_one_thread():
    index = big_index()
    chrome = chrome_trace(index, index.start_ns, index.end_ns + 1)
    names = [e["args"]["name"] for e in chrome["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
    assert names.count("thread 425") == 1 and not any("depth" in n for n in names)
    main = [lane for lane in index.lanes if lane.group == "cpu" and lane.path[-1] == "thread 425"]
    assert len(main) > 3   # several depth lanes...
    op = index.kinds.index("cpu_op")
    ops_in_main = sum(int((index.kind[index.lane_slice(lane.id)] == op).sum()) for lane in main)
    calls = [e for e in chrome["traceEvents"] if e.get("cat") == "cpu_op"]
    assert len(calls) == ops_in_main and len({e["tid"] for e in calls}) == 1   # ...one thread in Perfetto
