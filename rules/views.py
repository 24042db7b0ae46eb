"""Web pages for rules: the builtin pack (read-only) and the team's rules, an editor with
live validation, the version history and a test run against a finished trace.

Team-scoped like the rules API: another team's rule or trace is a 404.
"""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from diagnosis.tasks import diagnose_stored
from ingest.models import Trace
from ingest.uploads import team_for_upload
from rules.forms import RuleForm, TraceChoiceForm, unix_newlines
from rules.loader import load_rule_dirs
from rules.models import TeamRule, check_rule

TRACE_CHOICES = 50  # the newest finished traces offered for a test run


def get_rule_for(request, pk: int) -> TeamRule:
    return get_object_or_404(TeamRule.objects.visible_to(request.user).select_related("team"), pk=pk)


def builtin_rule(rule_id: str):
    rule = next((r for r in load_rule_dirs(None) if r.id == rule_id), None)
    if rule is None:
        raise Http404(f"no builtin rule {rule_id}")
    return rule


def testable_traces(request, rule: TeamRule | None):
    traces = Trace.objects.visible_to(request.user).filter(state=Trace.State.DONE).select_related("team")
    if rule is not None:
        traces = traces.filter(team=rule.team)
    return traces.defer("report")


@login_required
@require_GET
def rule_list(request):
    rules = TeamRule.objects.visible_to(request.user).select_related("team", "updated_by")
    return render(request, "rules/rule_list.html", {"builtin": load_rule_dirs(None), "rules": rules})


@login_required
@require_GET
def builtin_detail(request, rule_id: str):
    return render(request, "rules/builtin_detail.html", {"rule": builtin_rule(rule_id)})


@login_required
def rule_new(request):
    """A new team rule; `?from=<builtin id>` starts from a builtin rule's text."""
    source = request.GET.get("from")
    text = builtin_rule(source).source if source else render_to_string("rules/starter_rule.yaml")
    form = RuleForm(request.POST or None, user=request.user, new=True, initial={"yaml": text})
    if request.method == "POST" and form.is_valid():
        try:
            team = form.cleaned_data.get("team") or team_for_upload(request.user, None)
            TeamRule(team=team, yaml=form.cleaned_data["yaml"], created_by=request.user,
                     updated_by=request.user).save()
        except ValidationError as e:
            form.add_error("yaml", e)
        else:
            return redirect("rules:rule-list")
    return render(request, "rules/rule_form.html", {
        "form": form, "rule": None,
        "test_form": TraceChoiceForm(traces=testable_traces(request, None)[:TRACE_CHOICES])})


@login_required
def rule_edit(request, pk: int):
    rule = get_rule_for(request, pk)
    form = RuleForm(request.POST or None, user=request.user, new=False, initial={"yaml": rule.yaml})
    if request.method == "POST" and form.is_valid():
        rule.yaml, rule.updated_by = form.cleaned_data["yaml"], request.user
        try:
            rule.save()
        except ValidationError as e:
            form.add_error("yaml", e)
        else:
            return redirect("rules:rule-list")
    return render(request, "rules/rule_form.html", {
        "form": form, "rule": rule, "versions": rule.versions.select_related("saved_by"),
        "test_form": TraceChoiceForm(traces=testable_traces(request, rule)[:TRACE_CHOICES])})


@login_required
@require_POST
def rule_toggle(request, pk: int):
    """Enable / disable from the list (htmx); answers the updated row. The text does not
    change, so this neither re-validates it nor needs a version bump."""
    rule = get_rule_for(request, pk)
    TeamRule.objects.filter(pk=rule.pk).update(enabled=not rule.enabled, updated_by=request.user,
                                           updated_at=timezone.now())
    rule.refresh_from_db()
    return render(request, "rules/partials/rule_row.html", {"rule": rule})


@login_required
@require_POST
def rule_validate(request):
    """The editor's live check (htmx, while typing): errors with line and column."""
    rule, errors = check_rule(unix_newlines(request.POST.get("yaml", "")))
    return render(request, "rules/partials/validation.html", {"loaded": rule, "errors": errors})


@login_required
@require_POST
def rule_test(request):
    """Run the editor's text alone over one of the user's finished traces (htmx): its
    findings, or why there are none. Nothing is saved."""
    form = TraceChoiceForm(request.POST, traces=testable_traces(request, None))
    if not form.is_valid():
        raise Http404("no such finished trace")
    trace = form.cleaned_data["trace"]
    loaded, errors = check_rule(unix_newlines(request.POST.get("yaml", "")))
    report = diagnose_stored(trace, [loaded]) if loaded else None
    return render(request, "rules/partials/test_result.html", {
        "trace": trace, "loaded": loaded, "errors": errors,
        "findings": report.findings if report else (), "rule_errors": report.rule_errors if report else ()})
