"""The rule editor's test and backtest runs (diagnosis/rule_trials.py). tracedoc/urls.py serves
them with rules.urls under the one namespace `rules`, so their names (rules:rule-test, ...) and
paths (/rules/test/, ...) stay what the editor's htmx posts use; rules:rule-trial is what the
answer to such a post polls."""
from django.urls import path

from diagnosis.rule_trials import rule_backtest, rule_test, rule_trial

urlpatterns = [
    path("test/", rule_test, name="rule-test"),
    path("<int:pk>/backtest/", rule_backtest, name="rule-backtest"),
    path("backtest/", rule_backtest, name="rule-backtest-new"),
    path("trials/<uuid:trial_id>/", rule_trial, name="rule-trial"),
]
