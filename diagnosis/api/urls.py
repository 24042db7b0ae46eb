from django.urls import path
from rest_framework.routers import SimpleRouter

from diagnosis.api.diff import TraceDiffView
from diagnosis.api.slos import SLOViewSet
from diagnosis.api.timeline import LogLinesView, TimelineExportView, TimelineSearchView, TimelineView
from diagnosis.api.views import ClusterViewSet, RediagnoseView

router = SimpleRouter()
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("slos", SLOViewSet, basename="slo")
urlpatterns = [
    *router.urls,
    path("traces/<int:pk>/rediagnose/", RediagnoseView.as_view(), name="trace-rediagnose"),
    path("traces/<int:pk>/timeline/", TimelineView.as_view(), name="trace-timeline"),
    path("traces/<int:pk>/timeline/export/", TimelineExportView.as_view(), name="trace-timeline-export"),
    path("traces/<int:pk>/timeline/search/", TimelineSearchView.as_view(), name="trace-timeline-search"),
    path("traces/<int:pk>/lines/", LogLinesView.as_view(), name="trace-lines"),
    path("traces/<int:pk>/diff/<int:base_pk>/", TraceDiffView.as_view(), name="trace-diff"),
]
