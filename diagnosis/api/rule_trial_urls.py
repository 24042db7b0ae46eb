from rest_framework.routers import SimpleRouter

from diagnosis.api.rule_trials import RuleTrialReadViewSet, RuleTrialViewSet

# /api/v1/rules/: rules/api/views.py's viewset with diagnosis's test and backtest runs, which
# start the trials read at /api/v1/rule-trials/
router = SimpleRouter()
router.register("rules", RuleTrialViewSet, basename="rule")
router.register("rule-trials", RuleTrialReadViewSet, basename="rule-trial")
urlpatterns = router.urls
