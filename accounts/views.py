"""Settings pages: the user's API tokens (issue, revoke; htmx, one small view per action) and the
audit log of their teams."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_POST

from accounts.audit import AUDITED
from accounts.forms import TokenForm
from accounts.models import ApiToken, AuditEntry
from accounts.serializers import AuditQuerySerializer

AUDIT_PAGE_SIZE = 50


def _tokens(user):
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")


@login_required
@require_GET
def token_list(request):
    return render(request, "accounts/token_list.html", {"tokens": _tokens(request.user), "form": TokenForm()})


@login_required
@require_POST
def token_create(request):
    """Issue a token; the answer shows its key once (htmx swaps the panel, else a full page)."""
    form = TokenForm(request.POST)
    issued = key = None
    if form.is_valid():
        issued, key = form.issue(request.user)
        form = TokenForm()
    context = {"tokens": _tokens(request.user), "form": form, "issued": issued, "key": key}
    template = "accounts/partials/token_panel.html" if request.htmx else "accounts/token_list.html"
    return render(request, template, context, status=200 if issued or request.htmx else 400)


@login_required
@require_POST
def token_revoke(request, token_id: int):
    token = get_object_or_404(ApiToken, pk=token_id, user=request.user)
    token.revoke()
    if request.htmx:
        return render(request, "accounts/partials/token_row.html", {"token": token})
    return render(request, "accounts/token_list.html", {"tokens": _tokens(request.user), "form": TokenForm()})


@login_required
@require_GET
def audit_log(request):
    query = AuditQuerySerializer(data=request.GET)
    entries = AuditEntry.objects.visible_to(request.user).select_related("team")
    if query.is_valid():
        entries = query.apply(entries)
    else:
        entries = entries.none()
    page = Paginator(entries, AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    params = request.GET.copy()
    params.pop("page", None)
    return render(request, "accounts/audit_log.html", {
        "page": page, "errors": query.errors, "filters": request.GET, "params": params.urlencode(),
        "object_types": sorted(AUDITED), "actions": AuditEntry.Action.choices})
