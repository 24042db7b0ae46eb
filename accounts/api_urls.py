from rest_framework.routers import SimpleRouter

from accounts.api import ApiTokenViewSet, AuditEntryViewSet

router = SimpleRouter()
router.register("tokens", ApiTokenViewSet, basename="token")
router.register("audit", AuditEntryViewSet, basename="audit")
urlpatterns = router.urls
