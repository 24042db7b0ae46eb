from rest_framework.routers import SimpleRouter

from ingest.api.hosts import HostViewSet
from ingest.api.views import TraceViewSet

router = SimpleRouter()
router.register("traces", TraceViewSet, basename="trace")
router.register("hosts", HostViewSet, basename="host")
urlpatterns = router.urls
