"""Geometry of the timeline SVG: lanes per artifact, finding marks, evidence dots, ticks."""
from diagnosis.engine.timeline import LABEL_W, PAD_R, format_offset, layout, tick_offsets
from rules.engine.results import Evidence, Finding

S = 10**9


def test_lanes_and_marks_are_placed_on_one_time_axis():
    tl = layout([("a.json", 100 * S, 110 * S), ("b.log", 105 * S, 120 * S)],
                [Finding(id="F1", rule_id="r", title="t", severity="error", start_ts=110 * S, end_ts=110 * S,
                         evidence=(Evidence(artifact="b.log", loc="line 1", ts=115 * S, text="boom"),))],
                width=1000)
    right = 1000 - PAD_R
    per_s = (right - LABEL_W) / 20
    a, b = tl.lanes
    assert (a.x, a.w) == (LABEL_W, 10 * per_s)
    assert (b.x, round(b.x + b.w, 2)) == (LABEL_W + 5 * per_s, right)
    assert b.y > a.y
    mark = tl.marks[0]
    assert mark.x == LABEL_W + 10 * per_s and mark.w >= 3
    dot = tl.dots[0]
    assert (dot.x, dot.finding, dot.text) == (LABEL_W + 15 * per_s, "F1", "boom")
    assert b.y < dot.y < b.y + 24  # on b's lane
    assert tl.ticks[0].x == LABEL_W and tl.ticks[-1].x <= right


def test_an_artifact_without_times_gets_an_empty_lane():
    tl = layout([("a.json", 1 * S, 2 * S), ("topology.txt", None, None)], [])
    assert tl.lanes[1].x is None and len(tl.lanes) == 2


def test_no_times_at_all_gives_an_empty_timeline():
    assert layout([("x", None, None)], []).empty


def test_ticks_follow_a_1_2_5_step():
    assert tick_offsets(10 * S) == [0, 2 * S, 4 * S, 6 * S, 8 * S, 10 * S]
    assert tick_offsets(3 * 10**6)[:3] == [0, 500_000, 1_000_000]


def test_offsets_read_like_a_person_would_write_them():
    assert [format_offset(n) for n in (0, 2 * S, 1_500_000, 250_000, 12)] == ["0", "+2 s", "+1.5 ms", "+250 µs", "+12 ns"]


def test_a_wall_clock_trace_is_read_in_wall_clock_time():
    t0 = 1_795_944_739 * S + 400_000_000  # 2026-11-29 09:32:19.4 UTC
    tl = layout([("rank0.log", t0, t0 + 20 * S)], [])
    labels = [t.label for t in tl.ticks]
    assert labels[0] == "2026-11-29 09:32:20 UTC" and labels[1:3] == ["09:32:25", "09:32:30"]
    fine = layout([("kineto.json", t0, t0 + 3 * 10**6)], [])
    assert fine.ticks[1].label == "09:32:19.4005"


def test_an_artifact_on_its_own_clock_does_not_stretch_the_axis():
    t0 = 1_795_944_739 * S
    tl = layout([("rank0.log", t0, t0 + 10 * S), ("perf.txt", 2_580 * S, 2_590 * S)], [], own_clock={"perf.txt"})
    assert tl.lanes[1].x is None and tl.lanes[1].label == "perf.txt (own clock, not aligned)"
    assert tl.ticks[0].label == "2026-11-29 09:32:20 UTC" and tl.ticks[-1].label == "09:32:28"
