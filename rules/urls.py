from django.urls import path

from rules import views

# with diagnosis/rule_trial_urls.py (the editor's test and backtest runs) under the namespace
# `rules` in tracedoc/urls.py
app_name = "rules"
urlpatterns = [
    path("", views.rule_list, name="rule-list"),
    path("new/", views.rule_new, name="rule-new"),
    path("validate/", views.rule_validate, name="rule-validate"),
    path("hints/", views.rule_hints, name="rule-hints"),
    path("<int:pk>/edit/", views.rule_edit, name="rule-edit"),
    path("<int:pk>/toggle/", views.rule_toggle, name="rule-toggle"),
    path("builtin/<str:rule_id>/", views.builtin_detail, name="builtin-detail"),
]
