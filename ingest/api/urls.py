from rest_framework.routers import SimpleRouter

from ingest.api.views import TraceViewSet

router = SimpleRouter()
router.register("traces", TraceViewSet, basename="trace")
urlpatterns = router.urls
