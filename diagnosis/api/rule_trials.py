"""The rules API's test and backtest runs, which diagnose: `RuleViewSet` (rules/api/views.py:
CRUD, validation) extended with them, and the trials they start. A POST checks its input and
queues a trial on the diagnose queue (diagnosis.rule_trial_runs, the editor's service), answering
202 with the trial and its Location; `GET /api/v1/rule-trials/{id}/` reads it until `state` is
done (its `result`) or failed (its `error`). diagnosis/api/rule_trial_urls.py serves both."""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.reverse import reverse

from diagnosis.backtest_runs import DEFAULT_TRACES, MAX_TRACES
from diagnosis.models import RuleTrial
from diagnosis.rule_trial_runs import TESTABLE, settle, start_trial
from ingest.models import Trace
from problems import problem
from rules.api.views import RuleViewSet
from rules.models import parse_rule


class RuleBacktestSerializer(serializers.Serializer):
    yaml = serializers.CharField(trim_whitespace=False, help_text="the candidate version of this rule (same id)")
    traces = serializers.IntegerField(default=DEFAULT_TRACES, min_value=1, max_value=MAX_TRACES,
                                      help_text="how many of the team's newest finished traces")


class RuleTestSerializer(serializers.Serializer):
    trace = serializers.IntegerField(help_text="id of a parsed trace of your team")


class RuleTrialSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    result = serializers.JSONField(read_only=True, allow_null=True, help_text=(
        "once done: a test's findings, rule_errors and each selection's matched rows (matches); a "
        "backtest's traces with the findings and clusters the version adds or removes, vs_saved, not_run"))

    class Meta:
        model = RuleTrial
        fields = ["id", "kind", "state", "subject", "error", "result", "created_at", "started_at", "url"]
        read_only_fields = fields

    def get_url(self, trial: RuleTrial) -> str:
        return reverse("api:rule-trial-detail", args=[trial.pk], request=self.context.get("request"))


def accepted(request, trial: RuleTrial) -> Response:
    body = RuleTrialSerializer(trial, context={"request": request}).data
    return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})


class RuleTrialViewSet(RuleViewSet):
    @extend_schema(request=RuleTestSerializer, responses={202: RuleTrialSerializer})
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        """Run this rule alone over a parsed trace's events, on a worker: answers 202 with the
        trial; its `result` holds the findings once done."""
        rule = self.get_object()
        body = RuleTestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        trace = get_object_or_404(Trace.objects.visible_to(request.user), pk=body.validated_data["trace"])
        if trace.state not in TESTABLE:
            return problem(status.HTTP_409_CONFLICT, "trace-not-parsed", "The trace is not parsed yet",
                           f"trace {trace.pk} is {trace.state}: a rule runs on parsed traces", state=trace.state)
        trial = start_trial(request.user, trace.team, RuleTrial.Kind.TEST, f"{trace} (trace {trace.pk})",
                            rule.yaml, trace.pk)
        return accepted(request, trial)

    @extend_schema(request=RuleBacktestSerializer, responses={202: RuleTrialSerializer})
    @action(detail=True, methods=["post"])
    def backtest(self, request, pk=None):
        """Diagnose the team's newest finished traces with the rules as they were (without this
        rule) and with `yaml` (a candidate version of this rule, not saved), on a worker: answers
        202 with the trial; its `result`, once done, holds the findings and clusters it would add
        or remove; `vs_saved` and `matches`: what it changes against the saved version, findings
        and each selection's matched rows. Traces left out by the time budget are `not_run`."""
        rule = self.get_object()
        body = RuleBacktestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            candidate = parse_rule(body.validated_data["yaml"])
        except ValidationError as e:
            raise serializers.ValidationError({"yaml": e.messages}) from None
        if candidate.id != rule.rule_id:
            raise serializers.ValidationError({"yaml": [f"id: a version of {rule.rule_id} keeps its id"]})
        trial = start_trial(request.user, rule.team, RuleTrial.Kind.BACKTEST,
                            f"the newest finished traces of {rule.team}", body.validated_data["yaml"], rule.pk,
                            body.validated_data["traces"])
        return accepted(request, trial)


class RuleTrialReadViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """A rule test or backtest the user started: queued, running, done (`result`) or failed
    (`error`, never findings). Another user's, or an expired one (kept an hour), is not found."""
    serializer_class = RuleTrialSerializer

    def get_queryset(self):
        return RuleTrial.objects.readable_by(self.request.user)

    def get_object(self):
        return settle(super().get_object())
