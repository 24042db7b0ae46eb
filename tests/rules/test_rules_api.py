"""Team rules through the API: validated on every save (errors with line and column),
versions kept, a test run against a parsed trace (a trial on the diagnose queue, read at
/api/v1/rule-trials/{id}/ by the user who started it)."""
import gzip
import json

from django.core.files.uploadedfile import SimpleUploadedFile

from ingest.tasks import parse_trace
from ingest.uploads import create_trace
from rules.models import TeamRule
from tests.corpus import corpus
from tests.support.rule_texts import GRAPH_LAUNCHES as RULE


def create(client, text=RULE):
    return client.post("/api/v1/rules/", {"yaml": text}, format="json")


def test_a_valid_rule_is_saved_with_fields_read_from_its_yaml(alice_api, alice):
    response = create(alice_api)
    assert response.status_code == 201, response.content
    rule = TeamRule.objects.get()
    assert (rule.rule_id, rule.version, rule.severity, rule.owner, rule.team.slug, rule.created_by) == (
        "team.graph-launches", 1, "info", "infra", "infra", alice)


def test_an_invalid_rule_is_refused_with_line_and_column(alice_api):
    bad = RULE.replace("condition: launches", "condition: lunches")
    response = create(alice_api, bad)
    assert response.status_code == 400
    assert any(p["name"] == "yaml" and "line 12, col 12" in p["reason"] for p in response.json()["invalid_params"])
    assert TeamRule.objects.count() == 0


def test_validate_answers_structured_errors(alice_api):
    bad = RULE.replace("condition: launches", "condition: lunches")
    body = alice_api.post("/api/v1/rules/validate/", {"yaml": bad}, format="json").json()
    assert body["valid"] is False
    error = body["errors"][0]
    line = bad.splitlines()[error["line"] - 1]
    assert line.startswith("condition:") and line[error["col"] - 1:].startswith("lunches")
    good = alice_api.post("/api/v1/rules/validate/", {"yaml": RULE}, format="json").json()
    assert (good["valid"], good["rule_id"], good["version"]) == (True, "team.graph-launches", 1)


def test_changing_the_text_needs_a_new_version_and_keeps_the_old_one(alice_api):
    rule_id = create(alice_api).json()["id"]
    changed = RULE.replace("severity: info", "severity: warning")
    response = alice_api.patch(f"/api/v1/rules/{rule_id}/", {"yaml": changed}, format="json")
    assert response.status_code == 400 and "version" in str(response.json())
    bumped = changed.replace("version: 1", "version: 2")
    response = alice_api.patch(f"/api/v1/rules/{rule_id}/", {"yaml": bumped}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["version"], response.json()["severity"], response.json()["versions"]) == (2, "warning", [1])
    assert TeamRule.objects.get().versions.get().yaml == RULE


def test_the_same_rule_id_twice_in_a_team_is_refused(alice_api):
    create(alice_api)
    assert create(alice_api).status_code == 400


def test_another_teams_rule_is_404(alice_api, charlie_api):
    rule_id = create(alice_api).json()["id"]
    assert charlie_api.get(f"/api/v1/rules/{rule_id}/").status_code == 404
    assert charlie_api.delete(f"/api/v1/rules/{rule_id}/").status_code == 404


def test_a_rule_runs_against_a_parsed_trace(alice_api, infra, alice, trials, corpus_dir):
    kineto = corpus("h200", "cudagraph_abort", "kineto_trace.json.gz")
    events = json.loads(gzip.decompress(kineto.read_bytes()))["traceEvents"]
    launches = sum(1 for e in events if e.get("name") == "cudaGraphLaunch")
    assert launches == 20  # the corpus README: 20 healthy replays
    trace = create_trace(infra, alice, [SimpleUploadedFile(kineto.name, kineto.read_bytes())])
    parse_trace(trace.pk)
    rule_id = create(alice_api).json()["id"]
    trial = trials.run_api(alice_api, f"/api/v1/rules/{rule_id}/test/", {"trace": trace.pk})
    assert (trial["kind"], trial["state"], trial["error"]) == ("test", "done", "")
    body = trial["result"]
    assert (body["rule_id"], body["trace"], body["rule_errors"]) == ("team.graph-launches", trace.pk, [])
    [selection] = body["matches"]  # why it fired: the selection's rows
    assert selection["count"] == launches and len(selection["rows"]) == 5
    assert [f["rule_id"] for f in body["findings"]] == ["team.graph-launches"]
    assert f"{launches} graph replay(s)" in body["findings"][0]["explanation"]


def test_a_trial_that_fails_says_why_to_its_user_alone(alice_api, charlie_api, infra, alice, trials):
    trace = create_trace(infra, alice, [SimpleUploadedFile("a.log", b"x")])
    trace.state = "parsed"
    trace.save(update_fields=["state"])
    rule_id = create(alice_api).json()["id"]
    queued = alice_api.post(f"/api/v1/rules/{rule_id}/test/", {"trace": trace.pk}, format="json").json()
    assert charlie_api.get(queued["url"]).status_code == 404  # another team's user: not found
    gone = trace.pk
    trace.delete()  # before a worker takes the trial
    assert trials.run_queued() == 1
    failed = alice_api.get(queued["url"]).json()
    assert (failed["state"], failed["result"]) == ("failed", None)
    assert f"trace {gone} is no longer there to test on" in failed["error"]


def test_a_trace_not_parsed_yet_is_refused_before_anything_is_queued(alice_api, infra, alice, trials):
    trace = create_trace(infra, alice, [SimpleUploadedFile("a.log", b"x")])
    rule_id = create(alice_api).json()["id"]
    answer = alice_api.post(f"/api/v1/rules/{rule_id}/test/", {"trace": trace.pk}, format="json")
    assert answer.status_code == 409 and answer.json()["state"] == trace.state
    assert trials.take() == []


def test_testing_on_another_teams_trace_is_404(alice_api, charlie_api, charlie, other, no_worker):
    theirs = create_trace(other, charlie, [SimpleUploadedFile("a.log", b"x")])
    rule_id = create(alice_api).json()["id"]
    assert alice_api.post(f"/api/v1/rules/{rule_id}/test/", {"trace": theirs.pk}, format="json").status_code == 404


def test_features_are_listed_for_rule_authors(alice_api):
    body = alice_api.get("/api/v1/rules/features/").json()
    names = {f["name"] for f in body}
    assert {"oom_analysis", "nccl_timeouts", "decode_steps"} <= names
    assert all(f["doc"] for f in body)
