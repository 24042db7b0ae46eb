from django.urls import path

from rules import views

app_name = "rules"
urlpatterns = [
    path("", views.rule_list, name="rule-list"),
    path("new/", views.rule_new, name="rule-new"),
    path("validate/", views.rule_validate, name="rule-validate"),
    path("test/", views.rule_test, name="rule-test"),
    path("hints/", views.rule_hints, name="rule-hints"),
    path("<int:pk>/edit/", views.rule_edit, name="rule-edit"),
    path("<int:pk>/toggle/", views.rule_toggle, name="rule-toggle"),
    path("<int:pk>/backtest/", views.rule_backtest, name="rule-backtest"),
    path("backtest/", views.rule_backtest, name="rule-backtest-new"),
    path("builtin/<str:rule_id>/", views.builtin_detail, name="builtin-detail"),
]
