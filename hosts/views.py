"""Web pages for agent hosts: the list (last heartbeat, stale marker, last bundle) and one
host's page, where a person asks its agent for a capture and follows the request."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from hosts.forms import CaptureForm
from hosts.listing import host_list
from hosts.models import CaptureRequest, Host

CAPTURES_SHOWN = 50


@login_required
@require_GET
def host_index(request):
    hosts = host_list(request.user)
    waiting = outstanding_by_origin([h["id"] for h in hosts if h["id"]])
    return render(request, "hosts/host_list.html",
                  {"hosts": [{**h, "outstanding": waiting.get(h["id"], {})} for h in hosts]})


def outstanding_by_origin(host_ids: list[int]) -> dict[int, dict[str, int]]:
    """host id -> {origin: capture requests not yet done}: the closed loop's orders apart from people's."""
    counts: dict[int, dict[str, int]] = {}
    for row in (CaptureRequest.objects.filter(host_id__in=host_ids, state__in=CaptureRequest.OUTSTANDING)
                .values("host_id", "origin").annotate(n=Count("id"))):
        counts.setdefault(row["host_id"], {})[row["origin"]] = row["n"]
    return counts


@login_required
@require_http_methods(["GET", "POST"])
def host_detail(request, host_id: int):
    host = get_object_or_404(Host.objects.visible_to(request.user).select_related("team", "last_trace"), pk=host_id)
    form = CaptureForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        host.ask(form.cleaned_data["kind"], form.cleaned_data["steps"], request.user)
        return redirect("hosts:host-detail", host.pk)
    captures = host.captures.select_related("trace", "created_by", "cluster")[:CAPTURES_SHOWN]
    waiting = any(c.state in ("pending", "sent") for c in captures)
    return render(request, "hosts/host_detail.html",
                  {"host": host, "form": form, "captures": captures, "polling": waiting})
