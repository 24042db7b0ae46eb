from django.apps import AppConfig


class TracedocConfig(AppConfig):
    """The project as an app: it wires the apps together (ingest's signals to the workflow)."""
    name = "tracedoc"
    verbose_name = "tracedoc"

    def ready(self) -> None:
        # connects tracedoc.workflow's receivers: an upload queues its tasks in every process
        # (web, worker, management command), not only where the Celery app imported it
        from tracedoc import workflow  # noqa: F401
