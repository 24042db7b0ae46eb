"""The per-step latency chart: its geometry (scales, points, median line, cold points above
the scale) and the trace page drawing it from the report's series."""
import json
import re
import statistics

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from diagnosis.engine.charts.latency import PAD_B, PAD_L, PAD_R, PAD_T, chart, nice_step
from diagnosis.tasks import diagnose_trace
from ingest.models import Trace
from ingest.tasks import parse_trace
from ingest.uploads import create_trace
from tests.corpus import corpus

W, H = 1000, 300
LEFT, RIGHT, TOP, BOTTOM = PAD_L, W - PAD_R, PAD_T, H - PAD_B


def row(step, ms, cold=False, spike=False):
    return {"ts": 10**18 + step, "step": step, "ms": ms, "cold": cold, "spike": spike}


def test_points_are_placed_on_step_and_ms_scales():
    c = chart([row(0, 10), row(1, 20), row(2, 10), row(3, 30, spike=True), row(4, 10)], width=W, height=H)
    per_ms = (BOTTOM - TOP) / 30  # steady max 30 -> a 0..30 scale in steps of 10

    def y(ms):
        return round(BOTTOM - ms * per_ms, 2)

    per_step = (RIGHT - LEFT) / 4
    assert [(p.x, p.y) for p in c.points] == [
        (LEFT, y(10)), (LEFT + per_step, y(20)), (LEFT + 2 * per_step, y(10)),
        (LEFT + 3 * per_step, TOP), (RIGHT, y(10))]
    assert [p.kind for p in c.points] == ["steady", "steady", "steady", "spike", "steady"]
    assert [(t.pos, t.label) for t in c.y_ticks] == [(BOTTOM, "0"), (y(10), "10"), (y(20), "20"), (TOP, "30")]
    assert [t.label for t in c.x_ticks] == ["0", "1", "2", "3", "4"] and c.x_ticks[-1].pos == RIGHT
    assert c.path == "M" + " L".join(f"{p.x},{p.y}" for p in c.points)
    assert (c.median_ms, c.median_y, c.median_label) == (10, y(10), "10 ms")
    assert (c.spikes, c.cold, c.off_scale) == (1, 0, [])


def test_the_scale_fits_the_steady_state_and_cold_points_are_pinned_above_it():
    c = chart([row(0, 1000, cold=True), row(1, 40), row(2, 44), row(3, 48)], width=W, height=H)
    cold = c.points[0]
    assert (cold.kind, cold.clipped, cold.y) == ("cold", True, TOP)
    assert c.y_ticks[-1].label == "50"  # 48 ms -> a 0..50 scale, not 0..1000
    assert c.median_ms == 44  # the steady-state median leaves the cold start out
    assert c.off_scale == [cold] and c.cold == 1


def test_an_empty_series_draws_nothing():
    assert chart([]).empty and chart([]).path == ""
    assert chart([{"step": 0, "ms": None}]).empty


def test_one_step_sits_in_the_middle():
    c = chart([row(7, 3.5)], width=W, height=H)
    middle = (LEFT + RIGHT) / 2
    assert c.points[0].x == middle and [(t.pos, t.label) for t in c.x_ticks] == [(middle, "7")]


def test_tick_steps_are_1_2_5():
    assert [nice_step(x) for x in (0.7, 1.0, 1.3, 3, 7, 42)] == [1, 1, 2, 5, 10, 50]


@pytest.fixture
def logged_in(client, alice):
    client.force_login(alice)
    return client


def test_the_trace_page_draws_the_chart_of_a_decode_trace(logged_in, infra, alice, no_worker, corpus_dir):
    path = corpus("h200", "fragmented_decode", "token_latency.jsonl")
    latencies = [json.loads(line)["latency_ms"] for line in path.read_text().splitlines() if line.strip()]
    median = statistics.median(latencies)
    assert latencies[0] < 3 * median  # no cold start in this scenario: every step is steady
    spikes = sum(ms >= 1.5 * median for ms in latencies)
    assert spikes >= 5  # the README: every 6th step churns the allocator
    trace = create_trace(infra, alice, [SimpleUploadedFile(path.name, path.read_bytes())])
    parse_trace(trace.pk)
    diagnose_trace(trace.pk)
    trace.refresh_from_db()
    assert trace.state == "done", trace.error
    body = logged_in.get(f"/traces/{trace.pk}/").content.decode()
    section = body.split('id="latency-chart"', 1)[1].split("</section>", 1)[0]
    assert "Per-step latency" in section
    assert len(re.findall(r'<circle class="point', section)) == len(latencies)
    assert len(re.findall(r'<circle class="point spike"', section)) == spikes
    assert f"spike, ≥ 1.5× median ({spikes})" in section
    assert f"steady-state median {median:.3g} ms" in section and 'class="median"' in section


def test_a_report_without_the_series_has_no_chart(logged_in, infra):
    trace = Trace.objects.create(team=infra, name="t")
    for state in ("parsing", "parsed", "diagnosing"):
        trace.transition(state)
    trace.transition("done", report={"trace": {"artifacts": []}, "findings": [], "clusters": []})
    body = logged_in.get(f"/traces/{trace.pk}/").content.decode()
    assert "Per-step latency" not in body
