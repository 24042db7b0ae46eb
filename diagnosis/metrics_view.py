"""`GET /metrics`: the Prometheus exposition of diagnosis.metrics.

Who may scrape: a caller with an API token (`Authorization: Token <key>`) sees the teams of the
token's user; a scraper from a network in TRACEDOC_METRICS_ALLOWED_NETWORKS, or anyone when
TRACEDOC_METRICS_PUBLIC is set, sees every team. Without either the answer is 401.
"""
from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from rest_framework import exceptions

from accounts.authentication import ApiTokenAuthentication
from accounts.models import Team
from diagnosis.metrics import collector_for


def _from_allowed_network(request: HttpRequest) -> bool:
    networks = getattr(settings, "TRACEDOC_METRICS_ALLOWED_NETWORKS", ()) or ()
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(n, strict=False) for n in networks)


def _unauthorized(detail: str) -> HttpResponse:
    response = HttpResponse(detail + "\n", status=401, content_type="text/plain; charset=utf-8")
    response["WWW-Authenticate"] = ApiTokenAuthentication.keyword
    return response


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if getattr(settings, "TRACEDOC_METRICS_PUBLIC", False) or _from_allowed_network(request):
        teams = Team.objects.all()
    else:
        try:
            authenticated = ApiTokenAuthentication().authenticate(request)
        except exceptions.AuthenticationFailed as error:
            return _unauthorized(str(error.detail))
        if authenticated is None:
            return _unauthorized("An API token is required: Authorization: Token <key>.")
        teams = Team.objects.of(authenticated[0])
    # a registry per request: the collector reads the database now, nothing outlives the scrape
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector_for(teams))
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
