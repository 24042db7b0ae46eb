from rest_framework.routers import SimpleRouter

from rules.api.views import RuleViewSet

router = SimpleRouter()
router.register("rules", RuleViewSet, basename="rule")
urlpatterns = router.urls
