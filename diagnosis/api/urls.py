from rest_framework.routers import SimpleRouter

from diagnosis.api.slos import SLOViewSet
from diagnosis.api.views import ClusterViewSet

router = SimpleRouter()
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("slos", SLOViewSet, basename="slo")
urlpatterns = router.urls
