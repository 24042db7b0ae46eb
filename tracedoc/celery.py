"""The Celery app: configuration comes from Django settings (CELERY_* names)."""
import os

from celery import Celery
from celery.signals import worker_process_init

from ingest import process_memory

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tracedoc.settings")

app = Celery("tracedoc")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def _settle_memory(**_) -> None:
    """A pool child parses and diagnoses big traces: the same memory settings as the CLI."""
    process_memory.settle()
