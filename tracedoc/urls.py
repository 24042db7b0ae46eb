from django.contrib import admin
from django.urls import include, path

from alerts.api.urls import urlpatterns as alerts_api
from diagnosis.api.urls import urlpatterns as diagnosis_api
from diagnosis.metrics_view import metrics
from hosts.api_urls import urlpatterns as hosts_api
from ingest.api.urls import urlpatterns as ingest_api
from otlp_receiver.urls import urlpatterns as otlp_receiver
from rules.api.urls import urlpatterns as rules_api
from tracedoc.api_docs import docs_view, schema_view



urlpatterns = [
    path("", include("ingest.urls")),
    path("clusters/", include("diagnosis.urls")),
    path("rules/", include("rules.urls")),
    path("hosts/", include("hosts.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", include((ingest_api + diagnosis_api + rules_api + hosts_api + alerts_api, "api"))),
    path("metrics", metrics, name="metrics"),
    path("", include(otlp_receiver)),  # POST /v1/traces, where OTLP exporters post
    path("api/schema/", schema_view, name="schema"),
    path("api/docs/", docs_view, name="api-docs"),
]
