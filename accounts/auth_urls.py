"""Django's login, logout and password pages; the password-reset pages answer 404 unless a mail
server is configured (TRACEDOC_PASSWORD_RESET, from EMAIL_HOST): without one a reset mail
cannot be sent, and the page must not say it was."""
from __future__ import annotations

from functools import wraps

from django.conf import settings
from django.contrib.auth import urls as auth_urls
from django.http import Http404
from django.urls import path


def needs_mail(view):
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not settings.TRACEDOC_PASSWORD_RESET:
            raise Http404("password resets need a mail server (EMAIL_HOST); ask an admin to set your password")
        return view(request, *args, **kwargs)
    return wrapped


urlpatterns = [path(str(p.pattern), needs_mail(p.callback), name=p.name) if p.name.startswith("password_reset")
               else p for p in auth_urls.urlpatterns]
