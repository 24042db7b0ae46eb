"""The rule editor's "Test" and "Backtest" as trials (diagnosis.rule_trial_runs): the POST
queues one on the diagnose queue and answers with a partial that polls; the trial runs here
as the worker would (tests/rules/test_rule_trial_worker.py runs them on a real worker). What
stops a trial is said as such, never as findings; only the user who started it reads it; a
closed-loop capture is tried with the files it adds to (before/), as its diagnosis reads them."""
from datetime import timedelta

import pytest
from django.test import Client

from diagnosis.backtest_runs import backtest_rule
from diagnosis.models import RuleTrial
from diagnosis.rule_trial_runs import GIVE_UP_AFTER
from ingest.models import Trace
from rules.models import TeamRule, parse_rule
from tests.support.closed_loop_world import SPIKY
from tests.support.diagnosed_traces import diagnosed_file
from tests.support.rule_texts import GRAPH_LAUNCHES as RULE
from tests.support.rule_trials import poll, trial_of

pytestmark = pytest.mark.timeout(300)


def queued(client, url: str, data: dict) -> str:
    """POST the editor's form: the queued trial's id (the answer polls it every second)."""
    answer = client.post(url, data).content.decode()
    trial, state = trial_of(answer)
    assert state == "queued" and f'hx-get="/rules/trials/{trial}/"' in answer and 'hx-trigger="every 1s"' in answer
    return trial


def test_a_test_is_queued_then_done_with_the_rules_findings(logged_in, graph_trace, trials):
    trial = queued(logged_in, "/rules/test/", {"yaml": RULE, "trace": graph_trace.pk})
    assert trial_of(poll(logged_in, trial).content.decode())[1] == "queued"  # no worker took it yet: it polls on
    assert RuleTrial.objects.get(pk=trial).kind == "test"
    assert trials.run_queued() == 1
    done = poll(logged_in, trial).content.decode()
    assert trial_of(done)[1] == "done" and "hx-trigger" not in done  # polling stops
    assert done.count('class="finding"') == 1 and "20 graph replay(s)" in done


def test_only_the_user_who_started_a_trial_reads_it(logged_in, graph_trace, trials, bob, charlie):
    trial = queued(logged_in, "/rules/test/", {"yaml": RULE, "trace": graph_trace.pk})
    trials.run_queued()
    for other in (bob, charlie):  # bob is in alice's team: still not his
        client = Client()
        client.force_login(other)
        assert client.get(f"/rules/trials/{trial}/").status_code == 404
    assert Client().get(f"/rules/trials/{trial}/").status_code == 302  # the login page
    RuleTrial.objects.filter(pk=trial).update(expires_at=RuleTrial.objects.get(pk=trial).created_at)
    assert poll(logged_in, trial).status_code == 404  # expired


def test_a_trace_gone_before_the_trial_runs_fails_clearly(logged_in, graph_trace, trials):
    trial = queued(logged_in, "/rules/test/", {"yaml": RULE, "trace": graph_trace.pk})
    Trace.objects.filter(pk=graph_trace.pk).delete()
    trials.run_queued()
    failed = poll(logged_in, trial).content.decode()
    assert trial_of(failed)[1] == "failed" and 'class="error trial-error" role="alert"' in failed
    assert f"trace {graph_trace.pk} is no longer there to test on" in failed
    assert "finding" not in failed and "hx-trigger" not in failed


def test_a_stored_file_gone_fails_clearly(logged_in, graph_trace, trials, storage):
    trial = queued(logged_in, "/rules/test/", {"yaml": RULE, "trace": graph_trace.pk})
    gone = [p for p in storage.rglob("*.parquet")]
    assert gone
    for p in gone:
        p.unlink()
    trials.run_queued()
    failed = poll(logged_in, trial).content.decode()
    assert trial_of(failed)[1] == "failed" and f"the files of trace {graph_trace.pk} could not be read" in failed
    assert "kineto_trace.json.gz are gone" in failed
    assert 'class="finding"' not in failed and "no finding" not in failed
    [outcome] = backtest_rule(graph_trace.team, parse_rule(RULE)).outcomes  # the backtest says it of that trace
    assert outcome.delta is None and outcome.error == "stored events gone: kineto_trace.json.gz"


def test_a_backtest_of_a_deleted_rule_fails_clearly(logged_in, graph_trace, trials, ours):
    trial = queued(logged_in, f"/rules/{ours.pk}/backtest/", {"yaml": RULE.replace("version: 1", "version: 2")})
    TeamRule.objects.filter(pk=ours.pk).delete()
    trials.run_queued()
    failed = poll(logged_in, trial).content.decode()
    assert trial_of(failed)[1] == "failed" and f"rule {ours.pk} was deleted since the backtest was asked for" in failed


def test_a_trial_no_worker_finishes_is_given_up(logged_in, graph_trace, trials):
    trial = queued(logged_in, "/rules/test/", {"yaml": RULE, "trace": graph_trace.pk})
    RuleTrial.objects.filter(pk=trial).update(created_at=RuleTrial.objects.get(pk=trial).created_at - GIVE_UP_AFTER
                                              - timedelta(seconds=1))
    failed = poll(logged_in, trial).content.decode()
    assert trial_of(failed)[1] == "failed" and "no diagnosis worker finished it within 15 minutes" in failed
    trials.run_queued()  # a worker that comes late leaves it as the editor was told
    assert trial_of(poll(logged_in, trial).content.decode())[1] == "failed"


def test_a_broker_down_is_said_at_once(logged_in, graph_trace, dead_broker):
    answer = logged_in.post("/rules/test/", {"yaml": RULE, "trace": graph_trace.pk}).content.decode()
    assert trial_of(answer)[1] == "failed" and "the task broker is unreachable" in answer
    assert "hx-trigger" not in answer and "finding" not in answer


def test_a_text_that_does_not_load_is_answered_at_once(logged_in, graph_trace, ours, trials):
    other_id = RULE.replace("id: team.graph-launches", "id: team.other").replace("version: 1", "version: 2")
    answer = logged_in.post(f"/rules/{ours.pk}/backtest/", {"yaml": other_id}).content.decode()
    assert "The rule does not load" in answer and "a version of team.graph-launches keeps its id" in answer
    assert 'class="rule-trial"' not in answer and trials.take() == [] and not RuleTrial.objects.exists()


# every row of the files the capture adds to: they are under before/ in its inputs
EARLIER = """id: team.earlier-rows
version: 1
title: rows of the trace this capture adds to
status: experimental
severity: info
owner: infra
root_cause: team.earlier_rows
match:
  earlier:
    artifact|startswith: "before/"
condition: earlier
explain: "{count} row(s) under before/"
"""


def test_a_capture_is_tried_with_the_files_it_adds_to(logged_in, infra, alice, trials):
    first = diagnosed_file(infra, alice, SPIKY / "token_latency.jsonl")
    capture = diagnosed_file(infra, alice, SPIKY / "profiler_trace.json.gz", adds_to=first)
    rows = sum(a.event_count for a in first.artifacts.all())
    assert rows > 0
    done = trials.run(logged_in, "/rules/test/", {"yaml": EARLIER, "trace": capture.pk})
    assert f"{rows} row(s) under before/" in done
    assert f'data-selection="earlier"><td><code>earlier</code></td><td>events</td><td>{rows}</td>' in done
    # the backtest reads the same inputs: the capture is the team's newest finished trace
    [on_capture, on_first] = backtest_rule(infra, parse_rule(EARLIER), 2).outcomes
    assert on_capture.trace_id == capture.pk and on_capture.delta.matches[0].edited == rows
    assert on_first.trace_id == first.pk and on_first.delta.matches[0].edited == 0


def test_polling_a_trial_that_is_gone_stops_the_polling(logged_in, graph_trace, trials, bob):
    """htmx polls again every second after a 404: the editor's poll of an expired trial (or one that
    is not the user's) is answered with htmx's stop-polling status, and the same words either way."""
    trial = queued(logged_in, "/rules/test/", {"yaml": RULE, "trace": graph_trace.pk})
    RuleTrial.objects.filter(pk=trial).update(expires_at=RuleTrial.objects.get(pk=trial).created_at)
    other = Client()
    other.force_login(bob)
    answers = [c.get(f"/rules/trials/{trial}/", HTTP_HX_REQUEST="true") for c in (logged_in, other)]
    assert [a.status_code for a in answers] == [286, 286]
    assert answers[0].content == answers[1].content
    html = answers[0].content.decode()
    assert "hx-trigger" not in html and 'data-state="gone"' in html and "Run the test again" in html
