"""Web pages for rules: the builtin pack (read-only) and the team's rules, an editor with
live validation and the version history (its test and backtest runs, which diagnose, are
diagnosis/rule_trials.py).

Team-scoped like the rules API: another team's rule or trace is a 404.
"""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from ingest.models import Trace
from ingest.uploads import team_for_upload
from rules.engine.editor_hints import editor_hints
from rules.forms import RuleForm, TraceChoiceForm, unix_newlines
from rules.engine.loader import load_rule_dirs
from rules.models import TeamRule, check_rule, parse_rule

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
@require_GET
def rule_hints(request):
    """Keys, modifiers, columns and features for the editor's completion and hover."""
    return JsonResponse(editor_hints())


def _key_line(text: str, key: str) -> int:
    """The line of a top-level `key:` (1-based), or 1 when the text has none."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(f"{key}:"):
            return number
    return 1


def saved_rule_errors(rule: TeamRule, text: str, loaded) -> list[dict]:
    """What saving `text` over `rule` would refuse (the same checks as TeamRule.save), as
    editor errors, so the author sees a missing version bump while typing."""
    if loaded.id != rule.rule_id:
        return [{"line": _key_line(text, "id"), "col": 1,
                 "message": f"id: a saved rule keeps its id ({rule.rule_id}); create a new rule instead"}]
    if text != rule.yaml and int(loaded.version) <= rule.version:
        return [{"line": _key_line(text, "version"), "col": 1,
                 "message": f"version: the text changed, so bump `version:` above {rule.version}"}]
    return []


@login_required
@require_POST
def rule_validate(request):
    """The editor's live check (htmx, on every change): all errors with line and column,
    and for a saved rule (`rule` = its pk) the version-bump and kept-id checks."""
    text = unix_newlines(request.POST.get("yaml", ""))
    loaded, errors = check_rule(text)
    pk = request.POST.get("rule", "")
    if loaded is not None and pk.isdigit():
        errors = saved_rule_errors(get_rule_for(request, int(pk)), text, loaded)
        loaded = None if errors else loaded
    return render(request, "rules/partials/validation.html", {"loaded": loaded, "errors": errors})


def saved_version(rule: TeamRule):
    """The saved text of a team rule as a loader rule (None when it no longer loads)."""
    try:
        return parse_rule(rule.yaml)
    except ValidationError:
        return None
