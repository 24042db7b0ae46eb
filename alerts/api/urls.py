from rest_framework.routers import SimpleRouter

from alerts.api.views import AlertRuleViewSet, AlertViewSet, DestinationViewSet

router = SimpleRouter()
router.register("destinations", DestinationViewSet, basename="destination")
router.register("alert-rules", AlertRuleViewSet, basename="alert-rule")
router.register("alerts", AlertViewSet, basename="alert")
urlpatterns = router.urls
