from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Teams and tokens"

    def ready(self) -> None:
        # the login-failure counters and the audit log listen to signals
        from accounts import audit, login_throttle  # noqa: F401  (login_throttle: its receivers)
        audit.connect()
