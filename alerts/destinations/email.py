"""Email through Django's mail backend (EMAIL_BACKEND, DEFAULT_FROM_EMAIL)."""
from __future__ import annotations

from django.core.mail import send_mail

from alerts.destinations.http import DeliveryError
from alerts.message import AlertDigest, AlertMessage


def body(message: AlertMessage | AlertDigest) -> str:
    if isinstance(message, AlertDigest):
        return "\n\n".join([message.summary, f"All of them: {message.cluster_url}",
                              *(body(m) for m in message.messages)])
    return "\n".join([
        message.summary, "",
        f"Root cause: {message.root_cause}", f"Severity: {message.severity}",
        f"Seen in {message.trace_count} trace(s); hosts: {', '.join(message.hosts) or '-'}",
        f"Labels: {', '.join(f'{k}={v}' for k, v in message.labels.items()) or '-'}", "",
        f"Cluster: {message.cluster_url}", f"Trace: {message.trace_url}", "",
        f"Alert rule {message.rule!r} of team {message.team}."])


def send(destination, message: AlertMessage) -> None:
    try:
        send_mail(f"[tracedoc] {message.summary}", body(message), None, destination.recipients)
    except Exception as e:  # SMTP errors of every backend: retried like an HTTP failure
        raise DeliveryError(f"{type(e).__name__}: {e}") from None
