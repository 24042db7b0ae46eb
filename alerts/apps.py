from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "alerts"
    verbose_name = "Alerts"

    def ready(self) -> None:
        # listens to diagnosis.models.clusters_recorded: diagnosis never imports alerts
        from alerts import checks, receivers  # noqa: F401
