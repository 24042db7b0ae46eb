"""Clusters API: list and triage (status, assignee) a team's root causes."""
from rest_framework import mixins, viewsets

from diagnosis.api.serializers import ClusterSerializer
from diagnosis.models import Cluster


class ClusterViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.UpdateModelMixin,
                     viewsets.GenericViewSet):
    serializer_class = ClusterSerializer
    http_method_names = ["get", "patch", "head", "options"]

    def get_queryset(self):
        qs = Cluster.objects.visible_to(self.request.user).select_related("team", "assignee")
        if status := self.request.query_params.get("status"):
            qs = qs.filter(status=status)
        if severity := self.request.query_params.get("severity"):
            qs = qs.filter(severity=severity)
        return qs
