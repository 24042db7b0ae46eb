"""Alerts API (token auth, team-scoped): destinations, alert rules, and the alerts sent with
their delivery logs."""
from rest_framework import mixins, viewsets

from alerts.api.serializers import AlertRuleSerializer, AlertSerializer, DestinationSerializer
from alerts.models import Alert, AlertRule, Destination


class DestinationViewSet(viewsets.ModelViewSet):
    serializer_class = DestinationSerializer

    def get_queryset(self):
        return Destination.objects.visible_to(self.request.user).select_related("team")


class AlertRuleViewSet(viewsets.ModelViewSet):
    serializer_class = AlertRuleSerializer

    def get_queryset(self):
        return AlertRule.objects.visible_to(self.request.user).select_related("team").prefetch_related("destinations")

    def perform_create(self, serializer):
        serializer.save(created_by=self.request.user)


class AlertViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = AlertSerializer
    queryset = Alert.objects.none()  # the schema's type of {id}; requests use get_queryset

    def get_queryset(self):
        qs = (Alert.objects.filter(rule__team__in=self.request.user.teams.all())
              .select_related("rule").prefetch_related("deliveries__destination"))
        if cluster := self.request.query_params.get("cluster"):
            qs = qs.filter(cluster_id=cluster) if cluster.isdigit() else qs.none()
        return qs
