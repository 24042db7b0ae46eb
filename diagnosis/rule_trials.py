"""The rule editor's trials, which diagnose: "Test" (the editor's text alone over one finished
trace, with each selection's matched rows) and "Backtest" (the team's newest finished traces
with and without it). Served under the rules pages' names by diagnosis/rule_trial_urls.py; the
editor itself is rules/views.py, which imports nothing of diagnosis. A POST checks the text and
queues the trial on the diagnose queue (diagnosis.rule_trial_runs), answering at once with a
partial that polls `rule_trial` until the result is there. Nothing of the rule is saved."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from diagnosis.models import RuleTrial
from diagnosis.rule_trial_runs import TEMPLATES, settle, start_trial
from ingest.uploads import team_for_upload
from rules.forms import TraceChoiceForm, unix_newlines
from rules.models import check_rule
from rules.views import get_rule_for, testable_traces

TRIAL = "rules/partials/rule_trial.html"
TRIAL_GONE = "rules/partials/rule_trial_gone.html"
STOP_POLLING = 286  # htmx: swap this answer and poll no more


@login_required
@require_POST
def rule_test(request):
    """Run the editor's text alone over one of the user's finished traces (htmx), on a worker:
    its findings, and each selection's row count and first matched rows, which tell why a
    rule stayed quiet. A text that does not load is answered at once."""
    form = TraceChoiceForm(request.POST, traces=testable_traces(request, None))
    if not form.is_valid():
        raise Http404("no such finished trace")
    trace = form.cleaned_data["trace"]
    text = unix_newlines(request.POST.get("yaml", ""))
    loaded, errors = check_rule(text)
    if loaded is None:
        return render(request, TEMPLATES[RuleTrial.Kind.TEST], {"trace": trace, "errors": errors})
    trial = start_trial(request.user, trace.team, RuleTrial.Kind.TEST, f"{trace} (trace {trace.pk})", text, trace.pk)
    return render(request, TRIAL, {"trial": trial})


@login_required
@require_POST
def rule_backtest(request, pk: int | None = None):
    """The editor's text, saved or not (a new rule has no pk), against the team's rules as they
    were (without this rule) on its newest finished traces (htmx), on a worker: what it would
    add or remove, and for a saved rule what it changes against the saved version, findings
    and each selection's matched rows. A text that does not load is answered at once."""
    rule = get_rule_for(request, pk) if pk is not None else None
    text = unix_newlines(request.POST.get("yaml", ""))
    loaded, errors = check_rule(text)
    if loaded is not None and rule is not None and loaded.id != rule.rule_id:
        loaded, errors = None, [{"line": 1, "col": 1, "message": f"id: a version of {rule.rule_id} keeps its id"}]
    team = rule.team if rule is not None else None
    if team is None:
        try:  # the new-rule form's team (a user of several teams picks one), else the user's only team
            team = team_for_upload(request.user, request.POST.get("team") or None)
        except ValidationError as e:
            loaded, errors = None, [{"line": 1, "col": 1, "message": " ".join(e.messages)}]
    if loaded is None:
        return render(request, TEMPLATES[RuleTrial.Kind.BACKTEST], {"rule": rule, "errors": errors})
    trial = start_trial(request.user, team, RuleTrial.Kind.BACKTEST, f"the newest finished traces of {team}",
                        text, rule.pk if rule else None)
    return render(request, TRIAL, {"trial": trial})


@login_required
@require_GET
def rule_trial(request, trial_id):
    """A trial the user started (htmx polls it): still queued or running, its result partial,
    or why it failed. Another user's, or one of a team the user left, is not found."""
    trial = RuleTrial.objects.readable_by(request.user).filter(pk=trial_id).first()
    if trial is None and request.htmx:
        # htmx stops polling on 286 (a 404 would be polled again every second, for ever); the same words
        # for an expired trial and another user's, which tell nothing of the latter
        return render(request, TRIAL_GONE, status=STOP_POLLING)
    if trial is None:
        raise Http404("no such trial")
    return render(request, TRIAL, {"trial": settle(trial)})
