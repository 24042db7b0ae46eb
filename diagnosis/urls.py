from django.urls import path

from diagnosis import views

app_name = "diagnosis"
urlpatterns = [
    path("", views.cluster_list, name="cluster-list"),
    path("<int:cluster_id>/", views.cluster_detail, name="cluster-detail"),
    path("<int:cluster_id>/triage/", views.cluster_triage, name="cluster-triage"),
]
