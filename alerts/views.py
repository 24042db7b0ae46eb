"""Alert pages: a team's alert rules, destinations and recent alerts on one page; a form to
create or edit each; delete through htmx (the row goes); "Send test" to a destination (now,
links on the address the page was opened at); an alert's delivery log, which polls while a
delivery is pending. Another team's object is a 404."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.html import escape
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from alerts.destinations import SENDERS, DeliveryError
from alerts.forms import AlertRuleForm, DestinationForm
from alerts.message import trial_message
from alerts.models import Alert, AlertRule, Delivery, Destination
from alerts.redact import redact

RECENT_ALERTS = 50


def _alerts(user):
    return (Alert.objects.filter(rule__team__in=user.teams.all())
            .select_related("rule", "cluster").prefetch_related("deliveries__destination"))


@login_required
@require_GET
def alert_home(request):
    return render(request, "alerts/alert_home.html", {
        "rules": AlertRule.objects.visible_to(request.user).select_related("team").prefetch_related("destinations"),
        "destinations": Destination.objects.visible_to(request.user).select_related("team"),
        "alerts": _alerts(request.user)[:RECENT_ALERTS]})


def _edit(request, form_class, instance, what: str):
    form = form_class(request.POST or None, instance=instance, user=request.user)
    if request.method == "POST" and form.is_valid():
        obj = form.save(commit=False)
        if isinstance(obj, AlertRule) and obj.created_by_id is None:
            obj.created_by = request.user
        obj.save()
        form.save_m2m()
        messages.success(request, f"{what} {obj.name!r} saved")
        return redirect("alerts:alert-home")
    return render(request, "alerts/edit.html", {"form": form, "object": instance, "what": what},
                  status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def destination_edit(request, pk: int | None = None):
    instance = get_object_or_404(Destination.objects.visible_to(request.user), pk=pk) if pk else None
    return _edit(request, DestinationForm, instance, "Destination")


@login_required
@require_http_methods(["GET", "POST"])
def rule_edit(request, pk: int | None = None):
    instance = get_object_or_404(AlertRule.objects.visible_to(request.user), pk=pk) if pk else None
    return _edit(request, AlertRuleForm, instance, "Alert rule")


def _delete(request, obj, what: str):
    name = obj.name
    obj.delete()
    if request.htmx:  # the row is swapped for nothing
        return HttpResponse("")
    messages.success(request, f"{what} {name!r} deleted")
    return redirect("alerts:alert-home")


@login_required
@require_POST
def destination_delete(request, pk: int):
    return _delete(request, get_object_or_404(Destination.objects.visible_to(request.user), pk=pk), "Destination")


@login_required
@require_POST
def destination_test(request, pk: int):
    """Send a test notification to the destination now (not queued, not grouped) and say how it went."""
    destination = get_object_or_404(Destination.objects.visible_to(request.user).select_related("team"), pk=pk)
    message = trial_message(destination.name, destination.team.slug, request.build_absolute_uri("/"))
    try:
        status = SENDERS[destination.kind](destination, message)
    except DeliveryError as e:
        outcome, ok = f"Test to {destination.name!r} failed: {redact(str(e), destination.url, destination.secret)}", False
    else:
        outcome, ok = f"Test sent to {destination.name!r}" + (f" (HTTP {status})" if status else ""), True
    if request.htmx:
        return HttpResponse(f'<span class="{"delivery-sent" if ok else "delivery-failed"}" role="status">'
                            f'{escape(outcome)}</span>')
    (messages.success if ok else messages.error)(request, outcome)
    return redirect("alerts:alert-home")


@login_required
@require_POST
def rule_delete(request, pk: int):
    return _delete(request, get_object_or_404(AlertRule.objects.visible_to(request.user), pk=pk), "Alert rule")


@login_required
@require_GET
def alert_detail(request, pk: int):
    alert = get_object_or_404(_alerts(request.user), pk=pk)
    template = "alerts/partials/deliveries.html" if request.htmx else "alerts/alert_detail.html"
    deliveries = list(alert.deliveries.all())
    return render(request, template, {"alert": alert, "deliveries": deliveries,
                                      "waiting": any(d.state == Delivery.State.PENDING for d in deliveries)})
