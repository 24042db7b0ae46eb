from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from alerts.api.urls import urlpatterns as alerts_api
from diagnosis.api.urls import urlpatterns as diagnosis_api
from hosts.api_urls import urlpatterns as hosts_api
from ingest.api.urls import urlpatterns as ingest_api
from rules.api.urls import urlpatterns as rules_api

urlpatterns = [
    path("", include("ingest.urls")),
    path("clusters/", include("diagnosis.urls")),
    path("rules/", include("rules.urls")),
    path("hosts/", include("hosts.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", include((ingest_api + diagnosis_api + rules_api + hosts_api + alerts_api, "api"))),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]
