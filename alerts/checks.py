"""A start-up check: the links in alerts start with TRACEDOC_BASE_URL, so warn when it does not
name the host and port the app is being served on (`runserver HOST:PORT`, which runs the
checks at start-up): `make run PORT=8200` with a base URL on :8000 sends links nobody can open."""
from __future__ import annotations

import sys
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Warning, register

LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0", "::"}


def served_at(argv: list[str]) -> tuple[str, int] | None:
    """(host, port) the command line serves on, when it says: runserver's address."""
    args = argv[1:]
    if "runserver" not in args:
        return None
    rest = [a for a in args[args.index("runserver") + 1:] if not a.startswith("-")]
    text = rest[0] if rest else "8000"
    if text.isdigit():
        return "127.0.0.1", int(text)
    host, _, port = text.rpartition(":")
    return (host.strip("[]") or "127.0.0.1", int(port)) if port.isdigit() else (text, 8000)


def disagreement(base_url: str, served: tuple[str, int] | None) -> str:
    """Why base_url does not open where the app is served ('' when it does or nobody knows)."""
    if served is None:
        return ""
    parts = urlsplit(base_url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)
    host, served_port = served
    if port != served_port and (parts.hostname in LOOPBACK or host not in LOOPBACK):
        # a public base URL on :443 in front of a local server on :8000 is a proxy, not a mistake
        return f"TRACEDOC_BASE_URL is {base_url} but the app is served on port {served_port}"
    if host not in LOOPBACK and parts.hostname in LOOPBACK:
        return f"TRACEDOC_BASE_URL is {base_url} (this machine only) but the app is served on {host}:{served_port}"
    return ""


@register("tracedoc")
def base_url_check(app_configs=None, **kwargs) -> list[Warning]:
    why = disagreement(settings.TRACEDOC_BASE_URL, served_at(sys.argv))
    if not why:
        return []
    return [Warning(why, hint="alert links start with TRACEDOC_BASE_URL: set it to where people open tracedoc "
                              "(scripts/run.sh sets it from HOST and PORT when unset)", id="alerts.W001")]
