"""`Authorization: Token <key>` checked against ApiToken's hashes (DRF's TokenAuthentication
kept the keys themselves in its table)."""
from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from accounts.models import ApiToken

# last_used_at is a hint for people, not an audit trail: one write per token per minute at most
LAST_USED_RESOLUTION = timedelta(minutes=1)


class ApiTokenAuthentication(TokenAuthentication):
    keyword = "Token"

    def authenticate_credentials(self, key: str):
        token = ApiToken.find(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token
