from django.urls import path

from hosts import policy_views, views

app_name = "hosts"
urlpatterns = [
    path("", views.host_index, name="host-list"),
    path("<int:host_id>/", views.host_detail, name="host-detail"),
    # the cluster page's toggles: the closed loop's policy is the hosts app's
    path("closed-loop/<int:cluster_id>/", policy_views.closed_loop_toggle, name="closed-loop-toggle"),
]
