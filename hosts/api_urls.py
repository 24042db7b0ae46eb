from rest_framework.routers import SimpleRouter

from django.urls import path

from hosts.api import CapturePolicyViewSet, CaptureRequestViewSet, HostViewSet

router = SimpleRouter()
router.register("hosts", HostViewSet, basename="host")
router.register("captures", CaptureRequestViewSet, basename="capture")
policy = CapturePolicyViewSet.as_view({"get": "show", "put": "update"})
urlpatterns = router.urls + [path("capture-policy/", policy, name="capture-policy")]
