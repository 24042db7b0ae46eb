"""Login throttling: after too many failed logins for one username, or from one client address,
further attempts are refused for a while, whatever the password (the admin login too).

Failures are counted in the default cache (per web process unless TRACEDOC_CACHE_URL points
every process at one Redis). The window starts at the first failure: TRACEDOC_LOGIN_MAX_FAILURES
failures within TRACEDOC_LOGIN_LOCKOUT_MINUTES lock the username until the window ends; an
address gets TRACEDOC_LOGIN_MAX_FAILURES_PER_ADDRESS, higher, since many people may share one.
"""
from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver
from django.http import HttpRequest


def _keys(request: HttpRequest | None, username: str | None) -> list[tuple[str, int]]:
    """(cache key, failures allowed) of each thing counted for this attempt."""
    keys = []
    if username:
        digest = hashlib.sha256(username.strip().lower().encode()).hexdigest()
        keys.append((f"login-failures:user:{digest}", settings.TRACEDOC_LOGIN_MAX_FAILURES))
    address = request.META.get("REMOTE_ADDR") if request is not None else None
    if address:
        keys.append((f"login-failures:addr:{address}", settings.TRACEDOC_LOGIN_MAX_FAILURES_PER_ADDRESS))
    return keys


def is_locked_out(request: HttpRequest | None, username: str | None) -> bool:
    return any((cache.get(key) or 0) >= allowed for key, allowed in _keys(request, username))


def record_failure(request: HttpRequest | None, username: str | None) -> None:
    window_s = settings.TRACEDOC_LOGIN_LOCKOUT_MINUTES * 60
    for key, _ in _keys(request, username):
        cache.add(key, 0, timeout=window_s)  # the window starts at the first failure
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, timeout=window_s)


class ThrottledModelBackend(ModelBackend):
    """Django's user/password check, refused outright while the username or address is locked
    out: PermissionDenied stops `authenticate` from trying any other backend."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if is_locked_out(request, username):
            raise PermissionDenied("too many failed logins")
        return super().authenticate(request, username=username, password=password, **kwargs)


@receiver(user_login_failed)
def _count_failure(sender, credentials: dict, request: HttpRequest | None = None, **kwargs) -> None:
    record_failure(request, credentials.get("username"))


@receiver(user_logged_in)
def _forget_failures(sender, request: HttpRequest | None, user, **kwargs) -> None:
    """A successful login clears the username's count (not the address's: an attacker who owns
    one account must not reset the count of their guesses at the others)."""
    for key, _ in _keys(None, user.get_username()):
        cache.delete(key)
