"""The rule editor's trials as tasks: "Test" (the editor's text alone over one finished trace,
with each selection's matched rows) and "Backtest" (the team's newest finished traces with and
without it) run on the diagnose queue (`diagnosis.run_rule_trial`), never in the web request.

`start_trial` records a RuleTrial for the user and queues the task, whose message carries the
rule's text: nothing of the rule is saved. `run_trial`, the one service the task calls, runs the
diagnosis and stores its result on the trial twice, as the partial the editor shows
(rules/partials/test_result.html or backtest_result.html) and as the JSON the API answers
(`answer`), or the reason it failed; the editor (diagnosis.rule_trials.rule_trial) and the API
(diagnosis.api.rule_trials) poll the trial until it is done. Trials expire after KEEP.

The rules API's POSTs start the same trials: `/api/v1/rules/{id}/test/` and `backtest/` answer
202 with the trial, read at `/api/v1/rule-trials/{id}/`."""
from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial

from celery import shared_task
from django.template.loader import render_to_string
from django.utils import timezone

from diagnosis.backtest_runs import DEFAULT_TRACES, backtest_rule
from diagnosis.engine.results import json_values
from diagnosis.models import RuleTrial
from diagnosis.tasks import diagnose_stored, missing_files, stored_inputs
from ingest import db_outage
from ingest.models import Trace
from ingest.task_failures import failures
from rules.engine.compiler import compile_rule
from rules.engine.errors import EvalError
from rules.engine.features import TraceContext
from rules.models import TeamRule, check_rule
from rules.engine.selection_samples import selection_samples
from rules.views import saved_version

log = logging.getLogger(__name__)
SOFT_TIME_LIMIT_S = 10 * 60  # one trial on the worker (run_rule_trial)
KEEP = timedelta(hours=1)  # a trial's result is kept this long, for the page that asked for it
# a trial not finished this long after it was asked for has no worker that will finish it
# (none running, or it was killed): the editor says so instead of polling on
GIVE_UP_AFTER = timedelta(seconds=SOFT_TIME_LIMIT_S + 5 * 60)
BACKTEST_BUDGET_S = 120.0  # on the worker a backtest may take longer than the request could
TEMPLATES = {RuleTrial.Kind.TEST: "rules/partials/test_result.html",
             RuleTrial.Kind.BACKTEST: "rules/partials/backtest_result.html"}
# a rule is tried on a trace whose events are parsed, diagnosed or not (a trace being parsed
# again has none to read)
TESTABLE = (Trace.State.PARSED, Trace.State.DIAGNOSING, Trace.State.DONE)


class TrialFailed(Exception):
    """What stopped a trial, in words for the editor (not an internal error)."""


def start_trial(user, team, kind: str, subject: str, *args) -> RuleTrial:
    """A new trial of `user`'s, queued: `args` are the task's after the trial's id (the rule's
    text, then the trace's pk for a test, the saved rule's pk or None for a backtest, and for
    a backtest how many traces if not DEFAULT_TRACES)."""
    now = timezone.now()
    RuleTrial.objects.filter(expires_at__lt=now).delete()
    trial = RuleTrial.objects.create(kind=kind, user=user, team=team, subject=subject[:300], expires_at=now + KEEP)
    try:
        run_rule_trial.apply_async((str(trial.pk), *args))
    except Exception as e:  # kombu OperationalError and friends: the broker is unreachable
        log.warning("rule trial %s: could not queue it: %s", trial.pk, e)
        _fail(trial, f"the task broker is unreachable ({type(e).__name__}); try again later")
    return trial


@shared_task(name="diagnosis.run_rule_trial", acks_late=True, reject_on_worker_lost=False,
             soft_time_limit=SOFT_TIME_LIMIT_S, time_limit=SOFT_TIME_LIMIT_S + 60, **db_outage.RETRY)
def run_rule_trial(trial_id: str, text: str, target: int | None, traces: int = DEFAULT_TRACES) -> None:
    """The trial as a task on the diagnose queue (tracedoc.celery routes diagnosis.* there;
    settings.CELERY_IMPORTS registers it). A worker lost mid-trial does not get it again (a
    trial that kills its worker would kill the next): the editor gives up on it after
    GIVE_UP_AFTER."""
    run_trial(trial_id, text, target, traces)


def run_trial(trial_id: str, text: str, target: int | None, traces: int = DEFAULT_TRACES) -> None:
    """Run a queued trial and store its result (partial and JSON), or why it failed. `target`:
    the trace of a test, the saved rule of a backtest (None: a new rule); `traces`: how many
    of the team's newest finished traces a backtest runs on."""
    trial = RuleTrial.objects.filter(pk=trial_id, state__in=(RuleTrial.State.QUEUED, RuleTrial.State.RUNNING)) \
        .select_related("team").first()
    if trial is None:  # expired and purged, or finished by an earlier delivery
        return
    RuleTrial.objects.filter(pk=trial.pk).update(state=RuleTrial.State.RUNNING, started_at=timezone.now())
    with failures(partial(_fail, trial), log, f"rule trial {trial.pk} failed", doing=f"the rule {trial.kind}",
                  advice="try it on a smaller trace", internal=f"the rule {trial.kind} failed",
                  out_of_memory=f"out of memory: the rule {trial.kind} needed more than the worker's per-task "
                  "memory limit (TRACEDOC_TASK_MEMORY_LIMIT_MB)") as outcome:
        try:
            if trial.kind == RuleTrial.Kind.TEST:
                context = _test_context(trial, check_rule(text), target)
            else:
                context = _backtest_context(trial, check_rule(text), target, traces)
            html, result = render_to_string(TEMPLATES[trial.kind], context), answer(trial.kind, context)
        except TrialFailed as e:
            outcome.failed = True
            _fail(trial, str(e))
    if not outcome.failed:
        RuleTrial.objects.filter(pk=trial.pk).update(state=RuleTrial.State.DONE, html=html, result=result)


def _fail(trial: RuleTrial, error: str) -> None:
    RuleTrial.objects.filter(pk=trial.pk).update(state=RuleTrial.State.FAILED, error=error)
    trial.state, trial.error = RuleTrial.State.FAILED, error


def _test_context(trial: RuleTrial, checked: tuple, trace_pk: int) -> dict:
    """The editor's text alone over the trace's stored inputs as its diagnosis reads them (a
    closed-loop capture's with the files it adds to, under before/): its findings and each
    selection's matched rows."""
    loaded, errors = checked
    trace = Trace.objects.filter(pk=trace_pk, team=trial.team, state__in=TESTABLE).first()
    if trace is None:
        raise TrialFailed(f"trace {trace_pk} is no longer there to test on: it was deleted, or is being "
                          "parsed again, since the test was asked for")
    if gone := missing_files(stored_inputs(trace)[0]):
        raise TrialFailed(f"the files of trace {trace.pk} could not be read: the stored events of "
                          f"{', '.join(gone)} are gone")
    report, samples, sample_error, event_count = None, [], "", 0
    if loaded:
        events: list = []
        try:
            report = diagnose_stored(trace, [loaded], on_events=events.append)
        except OSError as e:  # a stored file gone or unreadable
            raise TrialFailed(f"the files of trace {trace.pk} could not be read ({type(e).__name__}: {e})") from None
        event_count = len(events[0])
        try:
            samples = selection_samples(compile_rule(loaded), TraceContext(events[0]))
        except EvalError as e:
            sample_error = str(e)
    return {"trace": trace, "loaded": loaded, "errors": errors, "samples": samples, "sample_error": sample_error,
            "event_count": event_count,
            "findings": report.findings if report else (), "rule_errors": report.rule_errors if report else ()}


def _backtest_context(trial: RuleTrial, checked: tuple, rule_pk: int | None, traces: int) -> dict:
    """The editor's text against the team's rules as they were on its newest finished traces,
    and against the saved version when there is one."""
    loaded, errors = checked
    rule = TeamRule.objects.filter(pk=rule_pk, team=trial.team).first() if rule_pk is not None else None
    if rule_pk is not None and rule is None:
        raise TrialFailed(f"rule {rule_pk} was deleted since the backtest was asked for")
    if loaded is not None and rule is None:  # a new rule of an id the team has: that one is its saved version
        rule = TeamRule.objects.filter(team=trial.team, rule_id=loaded.id).first()
    result = backtest_rule(trial.team, loaded, traces, BACKTEST_BUDGET_S,
                           saved=saved_version(rule) if rule else None) if loaded else None
    return {"rule": rule, "loaded": loaded, "errors": errors, "result": result}


def answer(kind: str, context: dict) -> dict:
    """A finished trial's result as the API answers it, from the context its partial shows."""
    loaded, errors = context["loaded"], context["errors"]
    head = {"rule_id": loaded.id if loaded else None, "version": int(loaded.version) if loaded else None,
            "errors": errors}
    if kind == RuleTrial.Kind.BACKTEST:
        return head | (context["result"].to_dict() if context["result"] else {})
    return head | {"trace": context["trace"].pk, "event_count": context["event_count"],
                   "findings": json_values(context["findings"]), "rule_errors": json_values(context["rule_errors"]),
                   "matches": json_values(context["samples"]), "matches_error": context["sample_error"]}


def settle(trial: RuleTrial) -> RuleTrial:
    """The trial as the editor shows it: one left unfinished past GIVE_UP_AFTER has failed."""
    if not trial.finished and trial.created_at < timezone.now() - GIVE_UP_AFTER:
        minutes = int(GIVE_UP_AFTER.total_seconds() // 60)
        _fail(trial, f"no diagnosis worker finished it within {minutes} minutes (none is running, or the "
                     "one that took it stopped); try again")
    return trial
