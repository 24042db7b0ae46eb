"""`/metrics` scraped as Prometheus does and parsed with prometheus_client's own parser: SLIs of
the newest trace per team and host, violations, clusters, traces by state, parse durations,
failures and the broker queue; a scrape needs a token and sees only the token's teams."""
from __future__ import annotations

import io
import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from diagnosis.models import record_report
from diagnosis.engine.results import Report
from ingest.models import Trace
from tests.support.cluster_world import NCCL, OOM, report
from tests.support.stack import ROOT

STEPS_MS = [500.0] + [10.0] * 98 + [40.0]  # one cold step (left out), then a 40 ms spike


def _report_dict(hosts: tuple[str, ...], steps: list[float], violations: list[dict], idle_pct: float) -> dict:
    """A stored report: clusters typed like a diagnosis, the series and breakdowns a run gives."""
    out = report(NCCL, OOM, hosts=hosts).to_dict()
    out["trace"]["series"] = {"step_latency_ms": [{"ts": i, "step": i, "ms": ms, "cold": i == 0, "spike": False}
                                                  for i, ms in enumerate(steps)]}
    span = 1_000_000
    out["breakdowns"] = {"temporal": [{"device": d, "span_ns": span, "idle_ns": int(span * idle_pct / 100),
                                       "idle_pct": idle_pct} for d in (0, 1)]}
    out["violations"] = violations
    return out


def _done_trace(team, labels: dict, stored: dict, parse_s: float) -> Trace:
    start = timezone.now() - timedelta(minutes=5)
    history = [{"state": s, "at": (start + timedelta(seconds=t)).isoformat()}
               for s, t in (("received", 0), ("parsing", 1), ("parsed", 1 + parse_s), ("diagnosing", 2 + parse_s),
                            ("done", 3 + parse_s))]
    trace = Trace.objects.create(team=team, labels=labels, state=Trace.State.DONE, state_history=history,
                                 report=stored)
    record_report(trace, Report.from_dict(stored))
    return trace


VIOLATIONS = [{"slo": "ttft_p99", "sli": "time_to_first_token", "observed": 812.5, "observed_text": "812.5 ms",
               "title": "TTFT", "objective": "p99 <= 500", "window": [0, 60], "burn_rate": 1.6, "findings": []},
              {"slo": "step_p99", "sli": "step_time", "observed": 40.0, "observed_text": "40 ms",
               "objective": "p99 <= 30", "window": [0, 60], "burn_rate": 1.3, "findings": []},
              {"slo": "broken", "sli": "step_time", "error": "no steps"}]


@pytest.fixture
def world(infra, other, alice_api, no_worker, django_capture_on_commit_callbacks):
    older = _done_trace(infra, {"host": "node-a"}, _report_dict((), [5.0] * 10, [], idle_pct=90.0), parse_s=2.0)
    Trace.objects.filter(pk=older.pk).update(created_at=timezone.now() - timedelta(hours=1))
    newest = _done_trace(infra, {"host": "node-a"}, _report_dict((), STEPS_MS, VIOLATIONS, idle_pct=25.0),
                         parse_s=4.0)
    _done_trace(infra, {}, _report_dict(("node-b",), [20.0] * 5, VIOLATIONS[1:], idle_pct=50.0), parse_s=0.3)
    _done_trace(other, {"host": "secret-host"}, _report_dict((), [1.0] * 5, [], idle_pct=0.0), parse_s=1.0)
    failed = Trace.objects.create(team=infra)
    failed.transition("parsing")
    failed.transition("failed", error="no usable file")
    upload = io.BytesIO(b"x")
    upload.name = "errors.log"
    with django_capture_on_commit_callbacks(execute=True):  # the task is sent once the upload commits
        assert alice_api.post("/api/v1/traces/", {"files": [upload]}, format="multipart").status_code == 201
    return {"older": older, "newest": newest}


def _scrape(client) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.content.decode())
            for s in family.samples}


def _value(samples, name: str, **labels) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_metrics_carry_slis_violations_clusters_and_health(world, alice_api):
    samples = _scrape(alice_api)
    node_a = {"team": "infra", "host": "node-a"}
    # the newest trace of infra/node-a stands for the host: its steady steps, not the older run's
    assert _value(samples, "tracedoc_latest_trace_id", **node_a) == world["newest"].pk
    assert _value(samples, "tracedoc_step_latency_ms", quantile="0.5", **node_a) == 10.0
    assert 10.0 < _value(samples, "tracedoc_step_latency_ms", quantile="0.99", **node_a) <= 40.0
    assert _value(samples, "tracedoc_step_latency_distribution_ms_bucket", le="10.0", **node_a) == 98
    assert _value(samples, "tracedoc_step_latency_distribution_ms_bucket", le="+Inf", **node_a) == 99
    assert _value(samples, "tracedoc_ttft_ms", **node_a) == 812.5
    assert _value(samples, "tracedoc_gpu_busy_percent", **node_a) == 75.0
    # a trace without a host label goes under the one host its events name
    node_b = {"team": "infra", "host": "node-b"}
    assert _value(samples, "tracedoc_step_latency_ms", quantile="0.5", **node_b) == 20.0
    assert ("tracedoc_ttft_ms", tuple(sorted(node_b.items()))) not in samples
    # violations over the window's done traces; an SLO whose SLI failed counts as none
    assert _value(samples, "tracedoc_slo_violations", slo="ttft_p99", **node_a) == 1
    assert _value(samples, "tracedoc_slo_violations", slo="step_p99", **node_b) == 1
    assert not any(name == "tracedoc_slo_violations" and ("slo", "broken") in labels for name, labels in samples)
    # clusters of warning and worse, by root cause/severity/status
    assert _value(samples, "tracedoc_clusters", team="infra", root_cause="nccl.timeout.stream_blocked",
                  severity="error", status="open") == 1
    assert _value(samples, "tracedoc_clusters", team="infra", root_cause="memory.oom",
                  severity="critical", status="open") == 1
    # health: 3 done, 1 failed in parsing, 1 received upload waiting in the broker queue
    assert _value(samples, "tracedoc_traces", team="infra", state="done") == 3
    assert _value(samples, "tracedoc_traces", team="infra", state="failed") == 1
    assert _value(samples, "tracedoc_traces", team="infra", state="received") == 1
    assert _value(samples, "tracedoc_traces", team="infra", state="parsing") == 0
    assert _value(samples, "tracedoc_trace_failures", team="infra", stage="parsing") == 1
    assert _value(samples, "tracedoc_parse_duration_seconds_bucket", le="0.5") == 1
    assert _value(samples, "tracedoc_parse_duration_seconds_bucket", le="+Inf") == 3
    assert _value(samples, "tracedoc_parse_duration_seconds_gsum") == pytest.approx(6.3)
    assert _value(samples, "tracedoc_queue_depth") == 1


def test_a_token_sees_only_its_teams(world, alice_api, charlie_api):
    assert not any(dict(labels).get("team") == "other" for _, labels in _scrape(alice_api))
    charlie = _scrape(charlie_api)
    assert {dict(labels).get("team") for _, labels in charlie} <= {"other", None}
    assert _value(charlie, "tracedoc_step_latency_ms", team="other", host="secret-host", quantile="0.5") == 1.0


def test_a_scrape_without_or_with_a_bad_token_is_401(client, db):
    assert client.get("/metrics").status_code == 401
    bad = client.get("/metrics", HTTP_AUTHORIZATION="Token not-a-token")
    assert bad.status_code == 401 and bad["WWW-Authenticate"] == "Token"


def test_an_allowed_network_or_a_public_setting_scrapes_without_a_token(client, settings, infra):
    Trace.objects.create(team=infra)
    settings.TRACEDOC_METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.2").status_code == 401
    allowed = client.get("/metrics", REMOTE_ADDR="10.1.2.3")
    assert allowed.status_code == 200
    assert 'tracedoc_traces{state="received",team="infra"} 1.0' in allowed.content.decode()
    settings.TRACEDOC_METRICS_ALLOWED_NETWORKS = []
    settings.TRACEDOC_METRICS_PUBLIC = True
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.2").status_code == 200


def test_host_labels_are_capped_per_team(infra, alice_api, monkeypatch):
    monkeypatch.setattr("diagnosis.metrics.MAX_HOSTS_PER_TEAM", 2)
    for n in range(4):
        _done_trace(infra, {"host": f"h{n}"}, _report_dict((), [5.0] * 3, [], idle_pct=10.0), parse_s=1.0)
    hosts = {dict(labels)["host"] for name, labels in _scrape(alice_api) if name == "tracedoc_latest_trace_id"}
    assert hosts == {"h3", "h2"}  # the most recently active


def test_the_grafana_dashboard_queries_only_metrics_the_scrape_exposes(world, alice_api):
    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries += [v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    used = {name for q in queries for name in re.findall(r"\btracedoc_\w+", q)}
    exposed = {name for name, _ in _scrape(alice_api)}
    assert used and used <= exposed, used - exposed


def test_ttft_comes_from_the_reports_slis(infra, alice_api, no_worker):
    with_slis = _report_dict((), [10.0] * 5, [], idle_pct=50.0)
    with_slis["slis"] = {"ttft_ms": 41.5, "gpu_busy_pct": 80.0}
    _done_trace(infra, {"host": "node-c"}, with_slis, parse_s=1.0)
    # a report whose slis say "no token steps" is not overridden by an SLO observation
    no_tokens = _report_dict((), [10.0] * 5, VIOLATIONS[:1], idle_pct=50.0)
    no_tokens["slis"] = {"ttft_ms": None, "gpu_busy_pct": None}
    _done_trace(infra, {"host": "node-d"}, no_tokens, parse_s=1.0)
    samples = _scrape(alice_api)
    assert _value(samples, "tracedoc_ttft_ms", team="infra", host="node-c") == 41.5
    assert ("tracedoc_ttft_ms", tuple(sorted({"team": "infra", "host": "node-d"}.items()))) not in samples


def test_the_collector_reads_the_queues_the_project_routes_to():
    """diagnosis.metrics finds the Celery app without importing the project (tracedoc.celery):
    the same broker, default queue and role queues."""
    from diagnosis.metrics import collector_for
    from tracedoc.celery import app, role_queues

    collector = collector_for([])
    assert collector.broker_url == str(app.conf.broker_url or "")
    assert collector.queue == app.conf.task_default_queue
    assert set(collector.queues) == {app.conf.task_default_queue, *role_queues()}
