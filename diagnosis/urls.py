from django.urls import path

from diagnosis import views

app_name = "diagnosis"
urlpatterns = [
    path("", views.cluster_list, name="cluster-list"),
    path("bulk/", views.cluster_bulk, name="cluster-bulk"),
    path("merge/", views.cluster_merge, name="cluster-merge"),
    path("<int:cluster_id>/", views.cluster_detail, name="cluster-detail"),
    path("<int:cluster_id>/triage/", views.cluster_triage, name="cluster-triage"),
    path("<int:cluster_id>/comment/", views.cluster_comment, name="cluster-comment"),
    path("<int:cluster_id>/snooze/", views.cluster_snooze, name="cluster-snooze"),
    path("<int:cluster_id>/merge/", views.cluster_merge, name="cluster-merge-into"),
    path("<int:cluster_id>/unmerge/", views.cluster_unmerge, name="cluster-unmerge"),
    # under /clusters/ with the rest of the app's pages; the trace page's button posts here
    path("rediagnose/<int:trace_id>/", views.trace_rediagnose, name="trace-rediagnose"),
]
