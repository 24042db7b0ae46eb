"""A destination's URL is a credential (a Slack or Teams webhook is its own key; tokens ride in
query strings): it is shown as scheme and host only, and taken out of every error text before
the text is logged or stored."""
from __future__ import annotations

from urllib.parse import urlsplit

HIDDEN = "…"


def mask_url(url: str) -> str:
    """`https://hooks.slack.com/…`: where it goes, not the key in its path or query."""
    if not url:
        return ""
    parts = urlsplit(url)
    if not parts.scheme or not parts.hostname:
        return HIDDEN
    host = parts.hostname + (f":{parts.port}" if parts.port else "")
    return f"{parts.scheme}://{host}/{HIDDEN}" if (parts.path.strip("/") or parts.query) else f"{parts.scheme}://{host}"


def redact(text: str, url: str = "", secret: str = "") -> str:
    """`text` without the URL's path and query, nor the secret (requests' errors quote them)."""
    parts = urlsplit(url) if url else None
    hidden = [url, secret]
    if parts is not None:
        hidden += [parts.path + ("?" + parts.query if parts.query else ""), parts.path, parts.query]
    for value in sorted((h for h in hidden if h and h not in ("/",)), key=len, reverse=True):
        text = text.replace(value, mask_url(url) if value == url else HIDDEN)
    return text
