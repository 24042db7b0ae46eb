"""The rule editor's trials, which diagnose: "Test" (the editor's text alone over one finished
trace, with each selection's matched rows) and "Backtest" (the team's newest finished traces
with and without it). Served under the rules pages' names by diagnosis/rule_trial_urls.py; the
editor itself is rules/views.py, which imports nothing of diagnosis. Nothing is saved."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_POST

from diagnosis.backtest_runs import DEFAULT_TRACES, backtest_rule
from diagnosis.models import SLODefinition
from diagnosis.pipeline import diagnose
from diagnosis.tasks import artifact_results
from ingest.uploads import team_for_upload
from rules.compiler import compile_rule
from rules.errors import EvalError
from rules.features import TraceContext
from rules.forms import TraceChoiceForm, unix_newlines
from rules.models import TeamRule, check_rule
from rules.selection_samples import selection_samples
from rules.views import get_rule_for, saved_version, testable_traces


@login_required
@require_POST
def rule_test(request):
    """Run the editor's text alone over one of the user's finished traces (htmx): its
    findings, and each selection's row count and first matched rows, which tell why a
    rule stayed quiet. Nothing is saved."""
    form = TraceChoiceForm(request.POST, traces=testable_traces(request, None))
    if not form.is_valid():
        raise Http404("no such finished trace")
    trace = form.cleaned_data["trace"]
    loaded, errors = check_rule(unix_newlines(request.POST.get("yaml", "")))
    report, samples, sample_error, event_count = None, [], "", 0
    if loaded:
        events = []
        report = diagnose(artifact_results(trace), rules=[loaded], clock_offsets=trace.clock_offsets or None,
                          slos=SLODefinition.objects.effective_for(trace.team), on_events=events.append)
        event_count = len(events[0])
        try:
            samples = selection_samples(compile_rule(loaded), TraceContext(events[0]))
        except EvalError as e:
            sample_error = str(e)
    return render(request, "rules/partials/test_result.html", {
        "trace": trace, "loaded": loaded, "errors": errors, "samples": samples, "sample_error": sample_error,
        "event_count": event_count,
        "findings": report.findings if report else (), "rule_errors": report.rule_errors if report else ()})


@login_required
@require_POST
def rule_backtest(request, pk: int | None = None):
    """The editor's text, saved or not (a new rule has no pk), against the team's rules as they
    were (without this rule) on its newest finished traces (htmx): what it would add or remove,
    and for a saved rule what it changes against the saved version, findings and each
    selection's matched rows. Nothing is saved."""
    rule = get_rule_for(request, pk) if pk is not None else None
    loaded, errors = check_rule(unix_newlines(request.POST.get("yaml", "")))
    if loaded is not None and rule is not None and loaded.id != rule.rule_id:
        loaded, errors = None, [{"line": 1, "col": 1, "message": f"id: a version of {rule.rule_id} keeps its id"}]
    team = rule.team if rule is not None else None
    if team is None:
        try:  # the new-rule form's team (a user of several teams picks one), else the user's only team
            team = team_for_upload(request.user, request.POST.get("team") or None)
        except ValidationError as e:
            loaded, errors = None, [{"line": 1, "col": 1, "message": " ".join(e.messages)}]
    if loaded is not None and rule is None:  # a new rule of an id the team has: that one is its saved version
        rule = TeamRule.objects.filter(team=team, rule_id=loaded.id).first()
    result = backtest_rule(team, loaded, DEFAULT_TRACES, saved=saved_version(rule) if rule else None) \
        if loaded else None
    return render(request, "rules/partials/backtest_result.html",
                  {"rule": rule, "loaded": loaded, "errors": errors, "result": result})
