from django.contrib import admin
from django.urls import include, path

from accounts.api_urls import urlpatterns as accounts_api
from alerts.api.urls import urlpatterns as alerts_api
from diagnosis.api.rule_trial_urls import urlpatterns as rules_api
from diagnosis.api.urls import urlpatterns as diagnosis_api
from diagnosis.metrics_view import metrics
from diagnosis.rule_trial_urls import urlpatterns as rule_trial_pages
from diagnosis.trace_urls import urlpatterns as trace_pages
from hosts.api_urls import urlpatterns as hosts_api
from ingest.urls import urlpatterns as ingest_pages
from otlp_receiver.urls import urlpatterns as otlp_receiver
from rules.urls import urlpatterns as rule_pages
from tracedoc.api_docs import docs_view, schema_view
from tracedoc.api_traces import urlpatterns as traces_api

# under /api/ a 404, 400 or 500 that no view answered is a problem document too
handler404 = "problems.not_found"
handler400 = "problems.bad_request"
handler500 = "problems.server_error"

urlpatterns = [
    # the trace pages: ingest's (list, upload, progress) and diagnosis's (the trace page, its diffs)
    path("", include((ingest_pages + trace_pages, "ingest"))),
    path("clusters/", include("diagnosis.urls")),
    # the rules pages: rules's (list, editor) and diagnosis's (the editor's test and backtest runs)
    path("rules/", include((rule_pages + rule_trial_pages, "rules"))),
    path("hosts/", include("hosts.urls")),
    path("alerts/", include("alerts.urls")),
    path("settings/", include("accounts.urls")),
    path("accounts/", include("accounts.auth_urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", include((traces_api + diagnosis_api + rules_api + hosts_api + alerts_api + accounts_api, "api"))),
    path("metrics", metrics, name="metrics"),
    path("", include(otlp_receiver)),  # POST /v1/traces, where OTLP exporters post
    path("api/schema/", schema_view, name="schema"),
    path("api/docs/", docs_view, name="api-docs"),
]
