"""The GPU telemetry chart: its geometry (shared time axis, per-panel scales, one polyline per
device, findings' spans as bands clipped to the axis) and the trace page drawing it from the
report's series; in a real browser, a screenshot of it for h200/nvml."""
import json
import re

import pytest

from diagnosis.engine import scenarios
from diagnosis.engine.charts.telemetry import GAP, PAD_B, PAD_L, PAD_R, PAD_T, PANEL_H, TITLE_H, chart, thin
from ingest.models import Trace
from rules.engine.results import Finding
from tests.corpus import corpus
from tests.support.fixtures import SHOTS, log_in

W = 1000
LEFT, RIGHT = PAD_L, W - PAD_R
S = 10**9
T0 = 1_700_000_000 * S


def points(polyline: str) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in polyline.split()]


def test_panels_share_the_time_axis_and_scale_from_zero():
    telemetry = {"0": {"gpu_util_pct": [[T0, 0], [T0 + 5 * S, 50], [T0 + 10 * S, 100]],
                       "mem_used_gib": [[T0, 2], [T0 + 10 * S, 9]]}}
    c = chart(telemetry, start_ts=T0, end_ts=T0 + 10 * S, width=W)
    util, mem = c.panels
    assert [p.key for p in c.panels] == ["gpu_util_pct", "mem_used_gib"]  # no power samples: no panel
    assert (util.y0, util.y1) == (PAD_T + TITLE_H, PAD_T + TITLE_H + PANEL_H)
    assert mem.y0 == util.y1 + GAP + TITLE_H and c.axis_y == mem.y1
    assert c.height == mem.y1 + PAD_B
    per_s = (RIGHT - LEFT) / 10
    assert points(util.lines[0].points) == [
        (LEFT, util.y1), (LEFT + 5 * per_s, util.y1 - PANEL_H / 2), (RIGHT, util.y0)]
    assert [t.label for t in util.y_ticks] == ["0", "25", "50", "75", "100"]  # a percentage is always 0-100
    # 9 GiB -> a 0..10 scale in steps of 5 (1-2-5)
    assert [(t.pos, t.label) for t in mem.y_ticks] == [(mem.y1, "0"), (mem.y1 - PANEL_H / 2, "5"), (mem.y0, "10")]
    assert points(mem.lines[0].points) == [
        (LEFT, round(mem.y1 - 0.2 * PANEL_H, 2)), (RIGHT, round(mem.y1 - 0.9 * PANEL_H, 2))]
    assert (mem.peak_label, mem.unit) == ("9", "GiB")
    assert [(t.pos, t.label) for t in c.x_ticks] == [(LEFT + k * 2 * per_s, str(2 * k)) for k in range(6)]


def test_the_axis_starts_at_the_trace_start_before_the_first_sample():
    c = chart({"0": {"power_w": [[T0 + 4 * S, 100], [T0 + 8 * S, 200]]}}, start_ts=T0, end_ts=T0 + 8 * S, width=W)
    assert [x for x, _ in points(c.panels[0].lines[0].points)] == [LEFT + (RIGHT - LEFT) / 2, RIGHT]
    # without the trace's span, the samples make the axis
    c = chart({"0": {"power_w": [[T0 + 4 * S, 100], [T0 + 8 * S, 200]]}}, width=W)
    assert [x for x, _ in points(c.panels[0].lines[0].points)] == [LEFT, RIGHT]


def test_several_devices_get_a_line_and_a_colour_each_in_device_order():
    telemetry = {str(d): {"power_w": [[T0, 100 + d], [T0 + S, 120 + d]]} for d in (10, 2, 0)}
    c = chart(telemetry, width=W)
    assert c.devices == [("0", 0), ("2", 1), ("10", 2)]
    assert [(line.device, line.colour, line.peak) for line in c.panels[0].lines] == [
        ("0", 0, 120), ("2", 1, 122), ("10", 2, 130)]
    assert len({line.points for line in c.panels[0].lines}) == 3


def band(fid, title, severity, start, end):
    return Finding(id=fid, rule_id="r", title=title, severity=severity, start_ts=start or 0, end_ts=end or 0)


def test_findings_become_bands_clipped_to_the_axis():
    telemetry = {"0": {"mem_used_gib": [[T0, 1], [T0 + 10 * S, 2]]}}
    findings = [
        band("F1", "inside", "warning", T0 + 2 * S, T0 + 4 * S),
        band("F2", "starts before", "critical", T0 - 5 * S, T0 + S),
        band("F3", "ends after", "error", T0 + 9 * S, T0 + 20 * S),
        band("F4", "outside", "error", T0 + 11 * S, T0 + 12 * S),
        band("F5", "untimed", "info", None, None),
        band("F6", "instant at the end", "info", T0 + 10 * S, None),
    ]
    c = chart(telemetry, findings, start_ts=T0, end_ts=T0 + 10 * S, width=W)
    per_s = (RIGHT - LEFT) / 10
    assert [(b.id, b.severity, b.x, b.w) for b in c.bands] == [
        ("F1", "warning", LEFT + 2 * per_s, 2 * per_s), ("F2", "critical", LEFT, per_s),
        ("F3", "error", LEFT + 9 * per_s, per_s), ("F6", "info", RIGHT - 3, 3)]
    assert all(LEFT <= b.x and b.x + b.w <= RIGHT for b in c.bands)
    assert [b.narrow for b in c.bands] == [False, False, False, True]  # an instant is drawn bolder
    assert c.band_severities == ["critical", "error", "warning", "info"]


def test_empty_input_draws_nothing():
    assert chart({}).empty and chart({}).panels == []
    assert chart({"0": {"power_w": []}}).empty
    assert chart({"0": {"power_w": [[T0, None], [T0 + S, float("nan")]]}}).empty


def test_a_single_sample_still_gets_an_axis():
    c = chart({"0": {"gpu_util_pct": [[T0, 40]]}}, width=W)
    assert points(c.panels[0].lines[0].points)[0][0] == LEFT and c.x_ticks[0].label == "0"


def test_thinning_keeps_the_extremes_of_each_pixel_column_in_time_order():
    pts = [(10.1, 5), (10.4, 9), (10.6, 1), (10.9, 4), (11.2, 3)]
    assert thin(pts) == [(10.4, 9), (10.6, 1), (11.2, 3)]


def nvml_samples() -> list[dict]:
    text = corpus("h200", "nvml", "nvml_samples.jsonl").read_text()
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert {r["gpu"] for r in rows} == {0}  # one device in this capture
    return rows


@pytest.fixture
def nvml_trace(infra, corpus_dir):
    """A finished trace whose report is h200/nvml's, plus the findings of the scenarios
    captured on the same clock (the corpus README), so the bands show."""
    report = scenarios.report(corpus("h200", "nvml"))
    for name in ("nccl_timeout", "oom_fragmentation", "fragmented_decode"):
        report["findings"] += scenarios.report(corpus("h200", name))["findings"]
    trace = Trace.objects.create(team=infra, name="nvml telemetry")
    for state in ("parsing", "parsed", "diagnosing"):
        trace.transition(state)
    trace.transition("done", report=report)
    return trace


def test_the_trace_page_draws_the_telemetry_of_the_nvml_capture(client, alice, nvml_trace):
    rows = nvml_samples()
    client.force_login(alice)
    body = client.get(f"/traces/{nvml_trace.pk}/").content.decode()
    section = body.split('id="telemetry-chart"', 1)[1].split("</section>", 1)[0]
    assert "GPU telemetry" in section
    for title, unit in (("GPU utilisation", "%"), ("Memory used", "GiB"), ("Power", "W")):
        assert f"{title} ({unit})" in section
    assert len(re.findall(r"<polyline ", section)) == 3  # one device, three metrics
    assert "GPU 0</li>" not in section  # no device legend for a single GPU
    peak_gib = max(r["mem_used"] for r in rows) / 2**30
    assert f"peak {peak_gib:.3g} GiB" in section
    assert f"peak {max(r['power_mw'] for r in rows) / 1000:.3g} W" in section
    assert f"peak {max(r['util_gpu'] for r in rows):.3g} %" in section
    # every finding of the merged report lies on the capture's clock: a band per finding, per panel
    findings = nvml_trace.report["findings"]
    assert findings and len(re.findall(r'<rect class="band sev-', section)) == 3 * len(findings)
    for x, w in re.findall(r'<rect class="band[^"]*" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', section):
        assert PAD_L <= float(x) and float(x) + float(w) <= 960 - PAD_R + 0.01


def test_a_report_without_telemetry_has_no_chart(client, alice, infra):
    trace = Trace.objects.create(team=infra, name="t")
    for state in ("parsing", "parsed", "diagnosing"):
        trace.transition(state)
    trace.transition("done", report={"trace": {"artifacts": [], "series": {}}, "findings": [], "clusters": []})
    client.force_login(alice)
    assert 'id="telemetry-chart"' not in client.get(f"/traces/{trace.pk}/").content.decode()


@pytest.mark.browser
@pytest.mark.timeout(300)
def test_screenshot_of_the_telemetry_chart(alice, nvml_trace, live_server, browser):  # noqa: F811
    # nvml_trace first: the database is not usable once Playwright runs its event loop
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    log_in(page, live_server.url + f"/traces/{nvml_trace.pk}/")
    page.wait_for_selector("#telemetry-chart")
    SHOTS.mkdir(parents=True, exist_ok=True)
    chart_el = page.locator("#telemetry-chart")
    chart_el.screenshot(path=str(SHOTS / "telemetry_chart_nvml.png"))
    page.screenshot(path=str(SHOTS / "trace_nvml.png"), full_page=True)
    assert chart_el.locator("polyline").count() == 3
    box = chart_el.locator("svg").bounding_box()
    assert box["width"] > 800 and box["height"] > 300
