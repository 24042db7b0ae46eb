"""The rule editor's trials on a real Celery worker subprocess and the real Redis broker: the
worker reads only the diagnose queue, so a trial that finishes went there. The editor's POST
answers at once with a queued trial; polling it shows it done with the findings the same rule
gives when run here; no other user reads it."""
import html

import pytest
from django.test import Client

from diagnosis.tasks import diagnose_stored
from rules.models import TeamRule, parse_rule
from tests.support.rule_texts import FIRING, MALLOC_IN_DECODE as RULE, QUIET
from tests.support.rule_trials import poll_until_finished, trial_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def started(client, url: str, data: dict) -> str:
    answer = client.post(url, data)
    assert answer.status_code == 200, answer.content[:2000]
    trial, state = trial_of(answer.content.decode())
    assert state == "queued"
    return trial


def test_a_test_goes_from_queued_to_done_on_the_worker(decode_trace, trial_worker, client, alice, bob, charlie):
    client.force_login(alice)
    trial = started(client, "/rules/test/", {"yaml": RULE, "trace": decode_trace.pk})
    states, done = poll_until_finished(client, trial, trial_worker)
    assert states[-1] == "done" and set(states) <= {"queued", "running", "done"}, (states, done[:2000])
    expected = diagnose_stored(decode_trace, [parse_rule(RULE)]).findings  # the same rule, run here
    assert [f.rule_id for f in expected] == ["team.malloc-in-decode"]
    assert done.count('class="finding"') == 1 and html.escape(expected[0].explanation) in done
    assert f'id="finding-{expected[0].id}"' in done
    log = trial_worker.read_text(errors="replace")
    assert "diagnosis.run_rule_trial" in log and "succeeded" in log
    for other in (bob, charlie):  # bob is alice's team mate: the trial is still hers alone
        web = Client()
        web.force_login(other)
        assert web.get(f"/rules/trials/{trial}/").status_code == 404


def test_a_backtest_goes_from_queued_to_done_on_the_worker(decode_trace, trial_worker, client, alice, infra):
    quiet = TeamRule.objects.create(team=infra, yaml=QUIET, created_by=alice, updated_by=alice)
    client.force_login(alice)
    trial = started(client, f"/rules/{quiet.pk}/backtest/", {"yaml": FIRING})
    states, done = poll_until_finished(client, trial, trial_worker)
    assert states[-1] == "done", (states, done[:2000])
    assert 'data-change="added"' in done and "team.malloc-in-decode" in done and 'data-change="removed"' not in done
    assert f'href="/traces/{decode_trace.pk}/"' in done
    quiet.refresh_from_db()
    assert (quiet.version, quiet.yaml) == (1, QUIET)  # nothing saved
