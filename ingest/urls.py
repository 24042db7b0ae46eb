from django.urls import path

from ingest import views

app_name = "ingest"
urlpatterns = [
    path("", views.trace_list, name="trace-list"),
    path("traces/new/", views.trace_upload, name="trace-upload"),
    path("traces/<int:trace_id>/", views.trace_detail, name="trace-detail"),
    path("traces/<int:trace_id>/progress/", views.trace_progress, name="trace-progress"),
]
