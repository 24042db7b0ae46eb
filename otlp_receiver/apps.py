from django.apps import AppConfig


class OtlpReceiverConfig(AppConfig):
    name = "otlp_receiver"
    verbose_name = "OTLP/HTTP receiver"
