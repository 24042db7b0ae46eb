from django.urls import path

from otlp_receiver.views import export_traces

urlpatterns = [path("v1/traces", export_traces, name="otlp-traces")]
