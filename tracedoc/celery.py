"""The Celery app: configuration comes from Django settings (CELERY_* names)."""
import os

from celery import Celery
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_process_init
from django.conf import settings

from ingest.engine import interruptions, process_memory

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tracedoc.settings")
# a task's time limit passes every per-file, per-rule and per-SLI guard to the task itself
interruptions.register(SoftTimeLimitExceeded)

# The role queue of each app's tasks (settings.TRACEDOC_QUEUES, docs/deployment.md "Scale-out").
ROLE_OF_APP = {"ingest": "parse", "diagnosis": "diagnose", "alerts": "notify"}


def route_by_role(name: str, args, kwargs, options, task=None, **kw) -> dict | None:
    """`<default queue>.<role>` for a task of ingest, diagnosis or alerts; the rest (beat jobs)
    on the default queue. Read when the task is sent, so a process that switches its default
    queue (a test's own stack) routes with it."""
    role = ROLE_OF_APP.get(name.partition(".")[0])
    return {"queue": _role_queue(role)} if role else None


def role_queues() -> list[str]:
    """The queues `route_by_role` sends to now (parse, diagnose, notify)."""
    return [_role_queue(role) for role in ROLE_OF_APP.values()]


def _role_queue(role: str) -> str:
    return f"{app.conf.task_default_queue}.{role}"


app = Celery("tracedoc")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def _settle_memory(**_) -> None:
    """A pool child parses and diagnoses big traces: the same memory settings as the CLI, and a
    memory cap so that one trace too big fails alone (TRACEDOC_TASK_MEMORY_LIMIT_MB)."""
    process_memory.settle()
    process_memory.limit(settings.TRACEDOC_TASK_MEMORY_LIMIT_MB * 1024 * 1024)
