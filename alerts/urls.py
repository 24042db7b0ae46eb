from django.urls import path

from alerts import views

app_name = "alerts"
urlpatterns = [
    path("", views.alert_home, name="alert-home"),
    path("<int:pk>/", views.alert_detail, name="alert-detail"),
    path("destinations/new/", views.destination_edit, name="destination-new"),
    path("destinations/<int:pk>/", views.destination_edit, name="destination-edit"),
    path("destinations/<int:pk>/delete/", views.destination_delete, name="destination-delete"),
    path("destinations/<int:pk>/test/", views.destination_test, name="destination-test"),
    path("rules/new/", views.rule_edit, name="rule-new"),
    path("rules/<int:pk>/", views.rule_edit, name="rule-edit"),
    path("rules/<int:pk>/delete/", views.rule_delete, name="rule-delete"),
]
