from celery import shared_task

from otlp_receiver.flush import flush_closed_windows


@shared_task(name="tracedoc.flush_otlp_windows")
def flush_otlp_windows() -> int:
    """Beat job: windows close with time, not only when the next export arrives."""
    return len(flush_closed_windows())
