"""Team rules API: CRUD, validation with line/column errors, a test run against a trace."""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from diagnosis.backtest_runs import backtest_rule
from rules.views import saved_version
from diagnosis.tasks import diagnose_stored
from ingest.api.problems import problem
from ingest.models import Trace
from ingest.uploads import team_for_upload
from rules.api.serializers import (
    RuleBacktestSerializer,
    RuleCreateSerializer,
    RuleSerializer,
    RuleTestSerializer,
    RuleTextSerializer,
    RuleValidationSerializer,
)
from rules.features import list_features
from rules.models import TeamRule, check_rule, parse_rule

TESTABLE = (Trace.State.PARSED, Trace.State.DIAGNOSING, Trace.State.DONE)


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

    @extend_schema(request=RuleTestSerializer, responses={200: dict})
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        """Run this rule alone over a parsed trace's events; returns its findings."""
        rule = self.get_object()
        body = RuleTestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        trace = get_object_or_404(Trace.objects.visible_to(request.user), pk=body.validated_data["trace"])
        if trace.state not in TESTABLE:
            return problem(status.HTTP_409_CONFLICT, "trace-not-parsed", "The trace is not parsed yet",
                           f"trace {trace.pk} is {trace.state}: a rule runs on parsed traces", state=trace.state)
        report = diagnose_stored(trace, [parse_rule(rule.yaml)]).to_dict()
        return Response({"rule_id": rule.rule_id, "version": rule.version, "trace": trace.pk,
                         "findings": report["findings"], "rule_errors": report["rule_errors"]})

    @extend_schema(request=RuleBacktestSerializer, responses={200: dict})
    @action(detail=True, methods=["post"])
    def backtest(self, request, pk=None):
        """Diagnose the team's newest finished traces with the rules as they were (without this
        rule) and with `yaml` (a candidate version of this rule, not saved): the findings and
        clusters it would add or remove; `vs_saved` and `matches`: what it changes against the
        saved version, findings and each selection's matched rows. Runs in the request within a
        time budget; traces it left out are `not_run`."""
        rule = self.get_object()
        body = RuleBacktestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            candidate = parse_rule(body.validated_data["yaml"])
        except ValidationError as e:
            raise serializers.ValidationError({"yaml": e.messages}) from None
        if candidate.id != rule.rule_id:
            raise serializers.ValidationError({"yaml": [f"id: a version of {rule.rule_id} keeps its id"]})
        return Response(backtest_rule(rule.team, candidate, body.validated_data["traces"],
                                      saved=saved_version(rule)).to_dict())
