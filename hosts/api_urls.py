from rest_framework.routers import SimpleRouter

from hosts.api import CaptureRequestViewSet, HostViewSet

router = SimpleRouter()
router.register("hosts", HostViewSet, basename="host")
router.register("captures", CaptureRequestViewSet, basename="capture")
urlpatterns = router.urls
