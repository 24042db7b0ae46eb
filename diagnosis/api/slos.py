"""SLOs API: a team's SLO definitions (CRUD) and the effective set a diagnosis uses."""
from dataclasses import asdict

from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from diagnosis.models import SLODefinition
from diagnosis.engine.slis import SLI_FUNCTIONS
from ingest.uploads import team_for_upload


class SLOSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    # a choice, so the schema lists the SLIs; the message is the model's own (SLODefinition.clean)
    sli = serializers.ChoiceField(choices=sorted(SLI_FUNCTIONS), error_messages={
        "invalid_choice": f"unknown SLI '{{input}}'; known: {', '.join(sorted(SLI_FUNCTIONS))}"})

    class Meta:
        model = SLODefinition
        fields = ["id", "team", "slo_id", "title", "sli", "objective", "window", "enabled", "updated_at"]

    def validate(self, attrs):
        candidate = SLODefinition(**{**({} if self.instance is None else
                                        {f: getattr(self.instance, f) for f in ("slo_id", "title", "sli",
                                                                                "objective", "window")}),
                                     **attrs})
        try:
            candidate.clean()
        except ValidationError as e:
            raise serializers.ValidationError(e.message_dict) from None
        return attrs


class SLOViewSet(viewsets.ModelViewSet):
    serializer_class = SLOSerializer

    def get_queryset(self):
        return SLODefinition.objects.visible_to(self.request.user).select_related("team")

    def perform_create(self, serializer):
        try:
            team = team_for_upload(self.request.user, self.request.data.get("team"))
        except ValidationError as e:
            raise serializers.ValidationError({"team": e.messages}) from None
        serializer.save(team=team)

    @extend_schema(responses={200: inline_serializer("EffectiveSLO", {
        "id": serializers.CharField(), "title": serializers.CharField(), "sli": serializers.CharField(),
        "objective": serializers.CharField(), "window": serializers.CharField()}, many=True)})
    @action(detail=False, methods=["get"], pagination_class=None)  # a short list, not paged
    def effective(self, request):
        """The SLOs a diagnosis of your team's traces uses: builtin defaults plus your overrides."""
        team = team_for_upload(request.user, request.query_params.get("team"))
        return Response([asdict(s) for s in SLODefinition.objects.effective_for(team)])
