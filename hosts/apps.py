from django.apps import AppConfig


class HostsConfig(AppConfig):
    name = "hosts"
    verbose_name = "Agent hosts"

    def ready(self) -> None:
        # listens to diagnosis.models.clusters_recorded: diagnosis never imports hosts
        from hosts import receivers  # noqa: F401
