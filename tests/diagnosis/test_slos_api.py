"""Team SLOs: CRUD with validation, team scoping, and the effective set a diagnosis uses."""
from diagnosis.engine import scenarios
from diagnosis.models import SLODefinition
from diagnosis.engine.pipeline import diagnose
from tests.corpus import corpus


def test_create_and_list(alice_api, infra):
    r = alice_api.post("/api/v1/slos/", {"slo_id": "token_latency_p99", "sli": "token_latency",
                                          "objective": "p99 <= 40ms", "window": "60s"}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["team"] == "infra"
    assert [s["slo_id"] for s in alice_api.get("/api/v1/slos/").json()["results"]] == ["token_latency_p99"]


def invalid(response) -> dict[str, str]:
    """The problem document's invalid parameters: name -> reason."""
    return {p["name"]: p["reason"] for p in response.json()["invalid_params"]}


def test_bad_objective_names_the_field(alice_api, infra):
    r = alice_api.post("/api/v1/slos/", {"slo_id": "x", "sli": "token_latency", "objective": "fast please"},
                       format="json")
    assert r.status_code == 400
    assert "is not" in invalid(r)["objective"]
    r = alice_api.post("/api/v1/slos/", {"slo_id": "x", "sli": "vibes", "objective": "max <= 1"}, format="json")
    assert r.status_code == 400 and "unknown SLI" in invalid(r)["sli"]


def test_other_team_cannot_see_it(alice_api, charlie_api, infra):
    pk = alice_api.post("/api/v1/slos/", {"slo_id": "ttft", "sli": "time_to_first_token", "objective": "max <= 1s"},
                        format="json").json()["id"]
    assert charlie_api.get(f"/api/v1/slos/{pk}/").status_code == 404
    assert charlie_api.get("/api/v1/slos/").json()["results"] == []


def test_effective_set_overrides_and_disables_builtins(alice_api, infra):
    SLODefinition.objects.create(team=infra, slo_id="token_latency_p99", sli="token_latency", objective="p99 <= 40ms")
    SLODefinition.objects.create(team=infra, slo_id="error_count", sli="error_count", objective="count <= 0",
                                 enabled=False)
    effective = {s["id"]: s for s in alice_api.get("/api/v1/slos/effective/").json()}
    assert effective["token_latency_p99"]["objective"] == "p99 <= 40ms"
    assert "error_count" not in effective and "graph_replay_success" in effective


def test_a_team_objective_changes_the_verdict(infra, corpus_dir):
    """healthy_decode's steady steps take ~45 ms: fine by default, a violation at 40 ms."""
    results, offsets = scenarios.parsed(str(corpus("h200", "healthy_decode")))
    assert diagnose(list(results), clock_offsets=offsets).violations == ()
    SLODefinition.objects.create(team=infra, slo_id="token_latency_p99", sli="token_latency", objective="p99 <= 40ms")
    report = diagnose(list(results), clock_offsets=offsets, slos=SLODefinition.objects.effective_for(infra))
    v = [v for v in report.violations if v.slo == "token_latency_p99"]
    assert v and v[0].observed > 40 and v[0].burn_rate > 1
