"""The rule pages: the builtin pack and the team's rules, the editor with live validation
(line/column errors), version bumps and history, the enabled toggle, a test run against a
finished trace. Team-scoped like the API: another team's rule or trace is a 404."""
import gzip
import html
import json
from pathlib import Path

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile

from ingest.uploads import create_trace
from rules.models import TeamRule
from tests.corpus import corpus
from tests.support.rule_texts import GRAPH_LAUNCHES as RULE, where

BUILTIN = Path(__file__).resolve().parents[2] / "rules" / "builtin"
BAD = RULE.replace("condition: launches", "condition: lunches")


@pytest.fixture
def theirs(other, charlie):
    return TeamRule.objects.create(team=other, yaml=RULE.replace("team.graph-launches", "their.secret-rule"))


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/rules/", "/rules/new/", "/rules/builtin/latency.jitter/"])
def test_rule_pages_need_a_login(client, url):
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_the_list_shows_the_builtin_pack_and_only_the_teams_rules(logged_in, ours, theirs):
    body = logged_in.get("/rules/").content.decode()
    builtin_ids = [doc["id"] for f in sorted(BUILTIN.glob("*.yaml"))
                   for doc in yaml.safe_load_all(f.read_text()) if doc]
    assert len(builtin_ids) > 10
    for rule_id in builtin_ids:
        assert f"/rules/builtin/{rule_id}/" in body
    assert "team.graph-launches" in body and f"/rules/{ours.pk}/edit/" in body
    assert "their.secret-rule" not in body


def test_another_teams_rule_is_404(logged_in, theirs):
    assert logged_in.get(f"/rules/{theirs.pk}/edit/").status_code == 404
    assert logged_in.post(f"/rules/{theirs.pk}/edit/", {"yaml": RULE}).status_code == 404
    assert logged_in.post(f"/rules/{theirs.pk}/toggle/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.enabled


def test_the_new_rule_page_starts_from_a_valid_commented_template(logged_in):
    body = logged_in.get("/rules/new/").content.decode()
    assert 'hx-trigger="keyup changed delay:500ms, editor-change delay:400ms"' in body and 'hx-post="/rules/validate/"' in body
    textarea = body.split('name="yaml"', 1)[1].split(">", 1)[1].split("</textarea>", 1)[0]
    starter = html.unescape(textarea)
    assert starter.lstrip().startswith("#")  # commented, for a team to adapt
    checked = logged_in.post("/rules/validate/", {"yaml": starter}).content.decode()
    assert "valid: <code>team.slow-kernels</code> v1" in checked


def test_a_valid_rule_is_created_from_the_form(logged_in, alice):
    response = logged_in.post("/rules/new/", {"yaml": RULE.replace("\n", "\r\n")})  # as a browser sends it
    assert response.status_code == 302 and response["Location"] == "/rules/"
    rule = TeamRule.objects.get()
    assert (rule.rule_id, rule.version, rule.team.slug, rule.created_by) == ("team.graph-launches", 1, "infra", alice)
    assert rule.yaml == RULE
    assert "team.graph-launches" in logged_in.get("/rules/").content.decode()


def test_an_invalid_rule_is_refused_with_line_and_column(logged_in):
    response = logged_in.post("/rules/new/", {"yaml": BAD})
    body = response.content.decode()
    assert response.status_code == 200 and TeamRule.objects.count() == 0
    assert f"{where(BAD, 'lunches')}: " in body and "lunches" in body


def test_editing_needs_a_version_bump_and_keeps_the_history(logged_in, ours):
    changed = RULE.replace("severity: info", "severity: warning")
    body = logged_in.post(f"/rules/{ours.pk}/edit/", {"yaml": changed}).content.decode()
    assert "bump `version:` above 1" in html.unescape(body)
    assert TeamRule.objects.get().version == 1
    # the same text back from a browser (CRLF) is no change: no bump asked, no new version
    assert logged_in.post(f"/rules/{ours.pk}/edit/", {"yaml": RULE.replace("\n", "\r\n")}).status_code == 302
    assert not ours.versions.exists()
    bumped = changed.replace("version: 1", "version: 2")
    assert logged_in.post(f"/rules/{ours.pk}/edit/", {"yaml": bumped}).status_code == 302
    ours.refresh_from_db()
    assert (ours.version, ours.severity) == (2, "warning")
    page = logged_in.get(f"/rules/{ours.pk}/edit/").content.decode()
    history = page.split("Version history", 1)[1]
    assert "<details" in history and "v1 · replaced" in history
    assert html.escape(RULE.splitlines()[2]) in history  # the old text, kept


def test_the_enabled_toggle_answers_the_row(logged_in, ours):
    row = logged_in.post(f"/rules/{ours.pk}/toggle/", HTTP_HX_REQUEST="true").content.decode()
    assert row.lstrip().startswith(f'<tr id="rule-row-{ours.pk}"') and ">disabled</button>" in row
    ours.refresh_from_db()
    assert not ours.enabled and ours.version == 1
    logged_in.post(f"/rules/{ours.pk}/toggle/", HTTP_HX_REQUEST="true")
    ours.refresh_from_db()
    assert ours.enabled


def test_the_validate_partial_lists_errors_or_says_valid(logged_in):
    bad = logged_in.post("/rules/validate/", {"yaml": BAD}, HTTP_HX_REQUEST="true").content.decode()
    assert f"{where(BAD, 'lunches')}: " in bad and "<html" not in bad
    broken = logged_in.post("/rules/validate/", {"yaml": "id: [unclosed\n"}).content.decode()
    assert "line " in broken and "invalid YAML" in broken
    good = logged_in.post("/rules/validate/", {"yaml": RULE}).content.decode()
    assert "valid: <code>team.graph-launches</code> v1" in good


def test_a_builtin_rule_shows_its_yaml_source(logged_in):
    docs = (BUILTIN / "latency.yaml").read_text().split("\n---\n")
    jitter = next(d for d in docs if yaml.safe_load(d)["id"] == "latency.jitter")
    body = logged_in.get("/rules/builtin/latency.jitter/").content.decode()
    assert html.escape(jitter.strip()) in body
    assert logged_in.get("/rules/builtin/no.such-rule/").status_code == 404
    copy = logged_in.get("/rules/new/?from=latency.jitter").content.decode()
    assert html.escape("title: Per-step latency tail far above the median") in copy


def test_a_rule_runs_alone_against_a_finished_trace(logged_in, graph_trace, trials):
    events = json.loads(gzip.decompress(corpus("h200", "cudagraph_abort", "kineto_trace.json.gz").read_bytes()))
    launches = sum(1 for e in events["traceEvents"] if e.get("name") == "cudaGraphLaunch")
    assert launches == 20  # the corpus README: 20 healthy replays
    page = logged_in.get("/rules/new/").content.decode()
    assert f'<option value="{graph_trace.pk}"' in page
    body = trials.run(logged_in, "/rules/test/", {"yaml": RULE, "trace": graph_trace.pk})
    assert f"{launches} graph replay(s)" in body and "CUDA graph replays seen" in body
    assert body.count('class="finding"') == 1  # alone: none of the builtin pack's findings
    quiet = trials.run(logged_in, "/rules/test/", {"yaml": RULE.replace("cudaGraphLaunch", "noSuchCall"),
                                                   "trace": graph_trace.pk})
    assert "no finding" in quiet
    # a text that does not load is answered at once, without a trial: its errors, not "no finding"
    broken = logged_in.post("/rules/test/", {"yaml": BAD, "trace": graph_trace.pk}).content.decode()
    assert "no finding" not in broken and "The rule does not load" in broken and f"{where(BAD, 'lunches')}: " in broken
    assert 'class="rule-trial"' not in broken and trials.take() == []


def test_testing_on_another_teams_trace_is_404(logged_in, other, charlie, no_worker):
    trace = create_trace(other, charlie, [SimpleUploadedFile("a.log", b"x")])
    for state in ("parsing", "parsed", "diagnosing"):
        trace.transition(state)
    trace.transition("done", report={})
    assert logged_in.post("/rules/test/", {"yaml": RULE, "trace": trace.pk}).status_code == 404
