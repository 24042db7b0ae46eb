"""Uploads per user over time (DRF throttling): a runaway agent or script cannot fill the
store or the queue. The rate is read from settings on each request, so it can be changed
without touching DRF's class attributes (which DRF reads once, at import)."""
from __future__ import annotations

from django.conf import settings
from rest_framework.throttling import UserRateThrottle


class UploadRateThrottle(UserRateThrottle):
    scope = "upload"

    def get_rate(self) -> str | None:
        return settings.TRACEDOC_UPLOAD_THROTTLE_RATE or None  # None: no throttle
