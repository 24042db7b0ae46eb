"""The OpenAPI schema and its Swagger page: behind a login unless the deployment makes them
public (TRACEDOC_PUBLIC_API_DOCS). Read at request time, so a test or an operator can flip it."""
from __future__ import annotations

from typing import Callable

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView


class ApiDocsPermission(BasePermission):
    """A session or an API token (the API's own authentication), or public docs."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return settings.TRACEDOC_PUBLIC_API_DOCS or bool(request.user and request.user.is_authenticated)


def _login_page_for_browsers(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A person opening the docs without a session goes to the login page, not to a 403;
    a token still works (DRF authenticates it inside the view)."""

    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if (not settings.TRACEDOC_PUBLIC_API_DOCS and not request.user.is_authenticated
                and "HTTP_AUTHORIZATION" not in request.META):
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return wrapped


schema_view = SpectacularAPIView.as_view(permission_classes=[ApiDocsPermission])
docs_view = _login_page_for_browsers(
    # the split view serves Swagger's init script from a URL: no inline script for the CSP to allow
    SpectacularSwaggerSplitView.as_view(url_name="schema", permission_classes=[ApiDocsPermission]))
