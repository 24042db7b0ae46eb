"""Team rules API: CRUD, validation with line/column errors (its test and backtest runs, which
diagnose, are diagnosis/api/rule_trials.py)."""
from __future__ import annotations

from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from ingest.uploads import team_for_upload
from rules.api.serializers import (
    RuleCreateSerializer,
    RuleSerializer,
    RuleTextSerializer,
    RuleValidationSerializer,
)
from rules.engine.features import list_features
from rules.models import TeamRule, check_rule


class RuleViewSet(viewsets.ModelViewSet):
    # accounts.permissions: checking or trying a rule saves nothing, a read token may
    token_scopes = {"validate": "read", "test": "read", "backtest": "read"}

    def get_queryset(self):
        return TeamRule.objects.visible_to(self.request.user).select_related("team", "created_by", "updated_by")

    def get_serializer_class(self):
        return RuleCreateSerializer if self.action == "create" else RuleSerializer

    def perform_create(self, serializer):
        try:
            team = team_for_upload(self.request.user, serializer.validated_data.pop("team", None))
            serializer.save(team=team, created_by=self.request.user, updated_by=self.request.user)
        except ValidationError as e:
            raise serializers.ValidationError({"yaml": e.messages}) from None

    def perform_update(self, serializer):
        try:
            serializer.save(updated_by=self.request.user)
        except ValidationError as e:
            raise serializers.ValidationError({"yaml": e.messages}) from None

    @extend_schema(responses={200: inline_serializer("RuleFeature", {
        "name": serializers.CharField(), "doc": serializers.CharField()}, many=True)})
    @action(detail=False, methods=["get"], pagination_class=None)  # a short fixed list, not paged
    def features(self, request):
        """The built-in features a rule can read with `from:` (name and what its rows hold)."""
        return Response(list_features())

    @extend_schema(request=RuleTextSerializer, responses=RuleValidationSerializer)
    @action(detail=False, methods=["post"])
    def validate(self, request):
        """Check a rule's YAML without saving it: errors carry line and column."""
        body = RuleTextSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        rule, errors = check_rule(body.validated_data["yaml"])
        return Response({"valid": not errors, "errors": errors,
                         "rule_id": rule.id if rule else None, "version": int(rule.version) if rule else None})
