from django.urls import path

from hosts import views

app_name = "hosts"
urlpatterns = [
    path("", views.host_index, name="host-list"),
    path("<int:host_id>/", views.host_detail, name="host-detail"),
]
