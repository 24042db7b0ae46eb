"""Generic JSON webhook: the alert message as JSON, signed so the receiver can check it came
from this tracedoc and was not replayed: `X-Tracedoc-Signature: t=<unix seconds>,v1=<hex>`,
hex = HMAC-SHA256(secret, "<t>.<body>")."""
from __future__ import annotations

import hashlib
import hmac
import time

from alerts.destinations.http import body_of, post
from alerts.message import AlertMessage

SIGNATURE_HEADER = "X-Tracedoc-Signature"


def sign(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(secret: str, header: str, body: bytes) -> bool:
    """What a receiver does (and the tests): recompute and compare in constant time."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    if "t" not in parts or "v1" not in parts or not parts["t"].isdigit():
        return False
    return hmac.compare_digest(sign(secret, int(parts["t"]), body), f"t={parts['t']},v1={parts['v1']}")


def send(destination, message: AlertMessage) -> int:
    # agent.stale / agent.recovered are about a host; the rest about a cluster
    event = message.trigger.replace("agent_", "agent.") if message.trigger.startswith("agent_") \
        else f"cluster.{message.trigger}"
    body = body_of({"event": event, **message.to_dict()})
    return post(destination.url, body, {SIGNATURE_HEADER: sign(destination.secret, int(time.time()), body)})
