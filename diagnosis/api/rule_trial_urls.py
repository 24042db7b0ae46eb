from rest_framework.routers import SimpleRouter

from diagnosis.api.rule_trials import RuleTrialViewSet

# /api/v1/rules/: rules/api/views.py's viewset with diagnosis's test and backtest runs
router = SimpleRouter()
router.register("rules", RuleTrialViewSet, basename="rule")
urlpatterns = router.urls
