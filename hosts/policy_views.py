"""The cluster page's closed-loop toggles (htmx): opt this cluster, or one of its rules, in or
out of the team's capture policy. Turning one on turns the team's loop on; turning one off
leaves the rest of the policy as it is. Without htmx the form posts and the page reloads."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from diagnosis.models import ClusterRecord
from hosts.closed_loop_page import can_change_policy, panel
from hosts.forms import ClosedLoopToggleForm
from hosts.models import CapturePolicy


@login_required
@require_POST
def closed_loop_toggle(request, cluster_id: int):
    cluster = get_object_or_404(ClusterRecord.objects.visible_to(request.user).select_related("team"), pk=cluster_id)
    if not can_change_policy(request.user, cluster.team):
        return HttpResponseForbidden("only a member of the cluster's team may change its capture policy")
    form = ClosedLoopToggleForm(request.POST, rules=frozenset(p.rule_id for p in panel(cluster, request.user).plans))
    if form.is_valid():
        _opt(cluster, form.cleaned_data["target"], form.cleaned_data["rule_id"], form.cleaned_data["on"])
    if not request.htmx:
        if not form.is_valid():
            messages.error(request, "; ".join(" ".join(v) for v in form.errors.values()))
        return redirect(reverse("diagnosis:cluster-detail", args=[cluster.pk]) + "#closed-loop")
    return render(request, "hosts/partials/closed_loop.html",
                  {"panel": panel(cluster, request.user), "errors": form.errors},
                  status=200 if form.is_valid() else 422)


def _opt(cluster: ClusterRecord, target: str, rule_id: str, on: bool) -> None:
    with transaction.atomic():
        CapturePolicy.of(cluster.team)
        policy = CapturePolicy.objects.select_for_update().get(team=cluster.team)  # two clicks at once: one list
        if target == "cluster":
            (policy.clusters.add if on else policy.clusters.remove)(cluster)
        elif on and rule_id not in policy.rules:
            policy.rules = [*policy.rules, rule_id]
        elif not on:
            policy.rules = [r for r in policy.rules if r != rule_id]
        policy.enabled = policy.enabled or on
        policy.save(update_fields=["rules", "enabled"])
