"""The rules API's test and backtest runs, which diagnose: `RuleViewSet` (rules/api/views.py:
CRUD, validation) extended with them; diagnosis/api/rule_trial_urls.py serves the result at
/api/v1/rules/, the operations and schema as before."""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from diagnosis.backtest_runs import DEFAULT_TRACES, MAX_TRACES, backtest_rule
from diagnosis.tasks import diagnose_stored
from problems import problem
from ingest.models import Trace
from rules.api.views import RuleViewSet
from rules.models import parse_rule
from rules.views import saved_version

TESTABLE = (Trace.State.PARSED, Trace.State.DIAGNOSING, Trace.State.DONE)


class RuleBacktestSerializer(serializers.Serializer):
    yaml = serializers.CharField(trim_whitespace=False, help_text="the candidate version of this rule (same id)")
    traces = serializers.IntegerField(default=DEFAULT_TRACES, min_value=1, max_value=MAX_TRACES,
                                      help_text="how many of the team's newest finished traces")


class RuleTestSerializer(serializers.Serializer):
    trace = serializers.IntegerField(help_text="id of a parsed trace of your team")


class RuleTrialViewSet(RuleViewSet):
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
