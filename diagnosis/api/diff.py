"""`GET /api/v1/traces/{id}/diff/{base_id}/`: what trace `id` changed against trace `base_id`
(clusters and findings that appeared, disappeared or persisted, SLO violations, SLI deltas,
top kernels and a regression verdict), from the two stored reports: the CLI's `tracedoc diff`
for traces already on the server."""
from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response
from rest_framework.views import APIView

from diagnosis.engine.diff.stored import compare_stored
from ingest.api.problems import trace_not_done
from problems import ProblemSerializer
from ingest.models import Trace
from rules.engine.severity import SEVERITIES

# a plain string: a choice field named `status` collides with the cluster triage enum in the schema
STATUS_HELP = "appeared, disappeared or persisted"


class DiffQuery(serializers.Serializer):
    fail_on = serializers.ChoiceField(choices=SEVERITIES, default="error",
                                      help_text="a finding at or above this severity that the trace has and "
                                                "the base has not is a regression")
    fail_on_regression = serializers.FloatField(required=False, min_value=0,
                                                help_text="percent: an SLI worse by more than this, or an SLO "
                                                          "newly violated, is a regression (default: not gated)")


class FindingChangeSerializer(serializers.Serializer):
    status = serializers.CharField(help_text=STATUS_HELP)
    rule_id = serializers.CharField()
    root_cause = serializers.CharField(allow_blank=True)
    title = serializers.CharField()
    severity = serializers.CharField()
    base_severity = serializers.CharField(allow_null=True)
    base_id = serializers.CharField(allow_null=True)
    new_id = serializers.CharField(allow_null=True)


class ClusterChangeSerializer(serializers.Serializer):
    status = serializers.CharField(help_text=STATUS_HELP)
    fingerprint = serializers.CharField()
    root_cause = serializers.CharField(allow_blank=True)
    title = serializers.CharField()
    severity = serializers.CharField()
    base_severity = serializers.CharField(allow_null=True)
    base_id = serializers.CharField(allow_null=True)
    new_id = serializers.CharField(allow_null=True)
    findings = serializers.IntegerField()


class ViolationChangeSerializer(serializers.Serializer):
    status = serializers.CharField(help_text=STATUS_HELP)
    slo = serializers.CharField()
    sli = serializers.CharField()
    title = serializers.CharField(allow_blank=True)
    base_observed = serializers.CharField(allow_null=True)
    new_observed = serializers.CharField(allow_null=True)


class SliDeltaSerializer(serializers.Serializer):
    name = serializers.CharField()
    label = serializers.CharField()
    unit = serializers.CharField()
    base = serializers.FloatField(allow_null=True)
    new = serializers.FloatField(allow_null=True)
    worse_when = serializers.ChoiceField(choices=("higher", "lower"), allow_null=True,
                                         help_text="null: reported, never gated")
    change_pct = serializers.FloatField(allow_null=True)
    regressed = serializers.BooleanField()
    note = serializers.CharField(allow_blank=True, help_text="why a figure is missing, or what it covers")


class KernelDeltaSerializer(serializers.Serializer):
    name = serializers.CharField()
    base_ms = serializers.FloatField(allow_null=True)
    new_ms = serializers.FloatField(allow_null=True)
    base_calls = serializers.IntegerField(allow_null=True)
    new_calls = serializers.IntegerField(allow_null=True)
    change_pct = serializers.FloatField(allow_null=True)


class VerdictSerializer(serializers.Serializer):
    regression = serializers.BooleanField()
    reasons = serializers.ListField(child=serializers.CharField())


class ThresholdsSerializer(serializers.Serializer):
    fail_on = serializers.CharField()
    fail_on_regression_pct = serializers.FloatField(allow_null=True)


class TraceDiffSerializer(serializers.Serializer):
    base = serializers.IntegerField(help_text="the base trace's id")
    trace = serializers.IntegerField(help_text="the compared trace's id")
    findings = FindingChangeSerializer(many=True)
    clusters = ClusterChangeSerializer(many=True)
    violations = ViolationChangeSerializer(many=True)
    slis = SliDeltaSerializer(many=True)
    kernels = KernelDeltaSerializer(many=True, help_text="from the reports' kernel breakdowns, summed over devices")
    verdict = VerdictSerializer()
    thresholds = ThresholdsSerializer()


class TraceDiffView(APIView):
    """The diff of trace `pk` against trace `base_pk`; both must be the caller's team's (else
    404) and diagnosed (else a 409 problem document). Time to first token and GPU busy come
    from the reports' `slis`; a report stored before those has them null, with the reason in `note`."""

    @extend_schema(parameters=[DiffQuery], responses={
        200: TraceDiffSerializer,
        404: OpenApiResponse(description="either trace is not visible to the caller"),
        409: OpenApiResponse(ProblemSerializer, description="either trace is not diagnosed yet")})
    def get(self, request, pk: int, base_pk: int):
        visible = Trace.objects.visible_to(request.user)
        trace, base = get_object_or_404(visible, pk=pk), get_object_or_404(visible, pk=base_pk)
        for side in (base, trace):
            if side.state != Trace.State.DONE or not side.report:
                return trace_not_done(side, request)
        query = DiffQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        diff = compare_stored(base.report, trace.report, fail_on=q["fail_on"],
                              fail_on_regression_pct=q.get("fail_on_regression"))
        return Response(TraceDiffSerializer({"base": base.pk, "trace": trace.pk, **diff.to_dict()}).data)
