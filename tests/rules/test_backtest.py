"""Backtest a rule version (`POST /api/v1/rules/{id}/backtest/` and the editor's button), a trial
on the diagnose queue: the team's newest finished traces diagnosed with the current rules and
with the candidate text; the findings and clusters it would add or remove, nothing saved."""
import pytest
from django.test import Client

from rules.models import TeamRule
from tests.support.diagnosed_traces import rule_ids
from tests.support.rule_texts import FIRING, MALLOC_IN_DECODE as RULE, QUIET

pytestmark = pytest.mark.timeout(300)



@pytest.fixture
def quiet_rule(infra, alice):
    return TeamRule.objects.create(team=infra, yaml=QUIET, created_by=alice, updated_by=alice)


def test_a_version_that_fires_is_listed_as_added(alice_api, decode_trace, quiet_rule, trials):
    trial = trials.run_api(alice_api, f"/api/v1/rules/{quiet_rule.pk}/backtest/", {"yaml": FIRING})
    assert (trial["kind"], trial["state"], trial["error"]) == ("backtest", "done", "")
    body = trial["result"]
    assert (body["rule_id"], body["version"], body["not_run"]) == ("team.malloc-in-decode", 2, [])
    [outcome] = body["traces"]
    assert outcome["trace"] == decode_trace.pk
    assert [f["rule_id"] for f in outcome["added_findings"]] == ["team.malloc-in-decode"]
    assert outcome["added_findings"][0]["rule_version"] == 2
    assert [c["root_cause"] for c in outcome["added_clusters"]] == ["team.malloc_in_decode"]
    assert outcome["removed_findings"] == [] and outcome["removed_clusters"] == []
    assert body["changed"] == 1
    quiet_rule.refresh_from_db()
    assert (quiet_rule.version, quiet_rule.yaml) == (1, QUIET)  # nothing saved
    decode_trace.refresh_from_db()
    assert "team.malloc-in-decode" not in rule_ids(decode_trace)


def test_a_version_that_changes_nothing_lists_nothing(alice_api, decode_trace, quiet_rule, trials):
    unchanged = QUIET.replace("version: 1", "version: 2")
    body = trials.run_api(alice_api, f"/api/v1/rules/{quiet_rule.pk}/backtest/", {"yaml": unchanged})["result"]
    [outcome] = body["traces"]
    assert [outcome[k] for k in ("added_findings", "removed_findings", "added_clusters", "removed_clusters")] \
        == [[], [], [], []]
    assert body["changed"] == 0


def test_removing_a_firing_rule_lists_it_as_removed(alice_api, alice, infra, decode_trace, trials):
    firing = TeamRule.objects.create(team=infra, yaml=RULE, created_by=alice, updated_by=alice)
    quiet_v2 = QUIET.replace("version: 1", "version: 2")
    body = trials.run_api(alice_api, f"/api/v1/rules/{firing.pk}/backtest/", {"yaml": quiet_v2})["result"]
    [outcome] = body["traces"]
    # against the rules as they were (without the rule) the quiet text adds nothing; against
    # the saved version it removes the finding, and its selection matches no row any more
    assert outcome["added_findings"] == [] and outcome["removed_findings"] == []
    assert [f["rule_id"] for f in outcome["vs_saved"]["removed_findings"]] == ["team.malloc-in-decode"]
    [match] = outcome["matches"]
    assert match["selection"] == "mallocs" and match["saved"] > 0 and match["edited"] == 0 and match["changed"]
    assert body["changed"] == 1


def test_team_scoped_and_checked(alice_api, charlie_api, quiet_rule, trials):
    """Refused before anything is queued."""
    assert charlie_api.post(f"/api/v1/rules/{quiet_rule.pk}/backtest/", {"yaml": FIRING},
                            format="json").status_code == 404
    other_id = FIRING.replace("id: team.malloc-in-decode", "id: team.other")
    assert alice_api.post(f"/api/v1/rules/{quiet_rule.pk}/backtest/", {"yaml": other_id},
                          format="json").status_code == 400
    assert alice_api.post(f"/api/v1/rules/{quiet_rule.pk}/backtest/", {"yaml": FIRING, "traces": 51},
                          format="json").status_code == 400
    assert alice_api.post(f"/api/v1/rules/{quiet_rule.pk}/backtest/", {"yaml": "id: ["},
                          format="json").status_code == 400
    assert trials.take() == []


def test_the_editor_button_shows_the_table(client, alice, decode_trace, quiet_rule, trials):
    client.force_login(alice)
    page = client.get(f"/rules/{quiet_rule.pk}/edit/").content.decode()
    assert f'hx-post="/rules/{quiet_rule.pk}/backtest/"' in page and "Backtest on recent traces" in page
    partial = trials.run(client, f"/rules/{quiet_rule.pk}/backtest/", {"yaml": FIRING})
    assert 'data-change="added"' in partial and "team.malloc-in-decode" in partial
    assert 'data-change="removed"' not in partial


# v2 keeps only the slow calls: the same finding on the same trace, about half the rows
SLOW_ONLY = RULE.replace("version: 1", "version: 2").replace("    name: cudaMalloc",
                                                              "    name: cudaMalloc\n    dur|gt: 50000")


def test_an_edit_that_changes_the_matched_rows_reports_the_change(alice_api, alice, infra, decode_trace, trials):
    """Issue 32: finding identity alone read "no change" for an edit that changed what matched."""
    saved = TeamRule.objects.create(team=infra, yaml=RULE, created_by=alice, updated_by=alice)
    body = trials.run_api(alice_api, f"/api/v1/rules/{saved.pk}/backtest/", {"yaml": SLOW_ONLY})["result"]
    [outcome] = body["traces"]
    assert body["saved_version"] == 1 and body["changed"] == 1
    [match] = outcome["matches"]
    assert match["selection"] == "mallocs" and 0 < match["edited"] < match["saved"] and match["changed"]
    # the same firing says other numbers: a changed finding, not an added and a removed one
    vs_saved = outcome["vs_saved"]
    assert vs_saved["added_findings"] == [] and vs_saved["removed_findings"] == []
    [edit] = vs_saved["changed_findings"]
    assert edit["rule_id"] == "team.malloc-in-decode" and (edit["before"]["rule_version"], edit["after"]["rule_version"]) == (1, 2)
    assert edit["before"]["explanation"] != edit["after"]["explanation"] or edit["metrics"]
    # and the editor's table says it
    web = Client()
    web.force_login(alice)
    partial = trials.run(web, f"/rules/{saved.pk}/backtest/", {"yaml": SLOW_ONLY})
    assert 'data-change="matches-changed"' in partial and f'{match["saved"]} → {match["edited"]}' in partial
    assert 'data-change="changed"' in partial and "no change" not in partial


def test_a_new_rule_is_backtested_before_it_is_saved(client, alice, infra, decode_trace, trials):
    client.force_login(alice)
    page = client.get("/rules/new/").content.decode()
    assert 'hx-post="/rules/backtest/"' in page
    partial = trials.run(client, "/rules/backtest/", {"yaml": RULE})
    assert 'data-change="added"' in partial and "team.malloc-in-decode" in partial
    assert 'data-change="matches"' in partial and "no change" not in partial
    assert not TeamRule.objects.exists()  # nothing saved


def test_the_traces_asked_for_bound_the_backtest(alice_api, decode_trace, graph_trace, quiet_rule, trials):
    """`traces` travels with the trial: of two finished traces, one asked for is the newest."""
    url = f"/api/v1/rules/{quiet_rule.pk}/backtest/"
    one = trials.run_api(alice_api, url, {"yaml": FIRING, "traces": 1})["result"]
    assert [o["trace"] for o in one["traces"]] == [graph_trace.pk] and one["not_run"] == []
    both = trials.run_api(alice_api, url, {"yaml": FIRING})["result"]
    assert sorted(o["trace"] for o in both["traces"]) == sorted([decode_trace.pk, graph_trace.pk])


def test_a_saved_rule_is_compared_without_itself(alice_api, alice, infra, decode_trace, trials):
    """Saved, then backtested with the same text: what the rule does, not "no change"."""
    saved = TeamRule.objects.create(team=infra, yaml=RULE, created_by=alice, updated_by=alice)
    [outcome] = trials.run_api(alice_api, f"/api/v1/rules/{saved.pk}/backtest/", {"yaml": RULE})["result"]["traces"]
    assert [f["rule_id"] for f in outcome["added_findings"]] == ["team.malloc-in-decode"]
    assert outcome["vs_saved"]["changed_findings"] == [] and not outcome["matches"][0]["changed"]
