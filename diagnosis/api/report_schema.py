"""The JSON report (diagnosis.results.Report.to_dict) described as OpenAPI components, so that a
client generated from the schema gets typed findings, clusters, violations and artifacts.

These serializers only describe: the stored report is answered as it is (`ReportField`), never
re-serialized, so a key added to the report cannot be dropped on the way out."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from rules.severity import SEVERITIES


class EvidenceSerializer(serializers.Serializer):
    artifact = serializers.CharField(help_text="the file the evidence is in")
    loc = serializers.CharField(help_text="where in it: 'line 12', 'line 3-9', 'event 41', or empty")
    ts = serializers.IntegerField(help_text="ns on the trace's common clock")
    text = serializers.CharField()


class ReportFindingSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="F1, F2... in time order")
    rule_id = serializers.CharField()
    rule_version = serializers.IntegerField()
    title = serializers.CharField()
    severity = serializers.ChoiceField(choices=SEVERITIES)
    root_cause = serializers.CharField(allow_blank=True)
    slo = serializers.CharField(allow_null=True)
    cluster = serializers.CharField(allow_null=True, help_text="the id of the cluster it belongs to (C1...)")
    start_ts = serializers.IntegerField()
    end_ts = serializers.IntegerField()
    explanation = serializers.CharField(allow_blank=True)
    recommendations = serializers.ListField(child=serializers.CharField())
    references = serializers.ListField(child=serializers.CharField())
    evidence = EvidenceSerializer(many=True)
    metrics = serializers.DictField(help_text="the rule's figures (numbers, text or null)")
    consequence_of = serializers.CharField(allow_null=True, help_text="the finding this one follows from")


class ReportClusterSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="C1, C2...")
    fingerprint = serializers.CharField(help_text="stable across traces: the same root cause, the same value")
    root_cause = serializers.CharField(allow_blank=True)
    title = serializers.CharField()
    severity = serializers.ChoiceField(choices=SEVERITIES)
    headline = serializers.CharField(help_text="the finding id that names the cluster")
    findings = serializers.ListField(child=serializers.CharField())
    slos = serializers.ListField(child=serializers.CharField())
    why_grouped = serializers.CharField(allow_blank=True)
    start_ts = serializers.IntegerField()
    earlier_fingerprints = serializers.ListField(
        child=serializers.CharField(), required=False,
        help_text="only while a grouping change is carried: the fingerprints this cluster had before "
                  "(a renamed root cause or an earlier grouping version); the team's cluster of any of "
                  "them takes `fingerprint`")


class SLOOutcomeSerializer(serializers.Serializer):
    """A violated SLO, or (with `error` and `slo` only) an SLO that could not be evaluated."""
    slo = serializers.CharField()
    error = serializers.CharField(required=False, help_text="present only when the SLI could not be computed")
    title = serializers.CharField(required=False)
    sli = serializers.CharField(required=False)
    objective = serializers.CharField(required=False)
    window = serializers.ListField(child=serializers.IntegerField(), required=False,
                                   help_text="[start_ns, end_ns] of the worst window")
    observed = serializers.FloatField(required=False)
    observed_text = serializers.CharField(required=False)
    burn_rate = serializers.FloatField(required=False)
    samples = serializers.IntegerField(required=False)
    findings = serializers.ListField(child=serializers.CharField(), required=False)


class ReportArtifactSerializer(serializers.Serializer):
    path = serializers.CharField()
    format = serializers.CharField(help_text="the parser that read it; 'unknown' when none could")
    events = serializers.IntegerField()
    warnings = serializers.ListField(child=serializers.CharField())
    internal_error = serializers.BooleanField(required=False)
    start_ts = serializers.IntegerField(allow_null=True)
    end_ts = serializers.IntegerField(allow_null=True)


class ReportTraceSerializer(serializers.Serializer):
    artifacts = ReportArtifactSerializer(many=True)
    events = serializers.IntegerField()
    start_ts = serializers.IntegerField(allow_null=True)
    end_ts = serializers.IntegerField(allow_null=True)
    alignment = serializers.ListField(child=serializers.DictField(), help_text="how each file's clock was aligned")
    series = serializers.DictField(help_text="plot series: step_latency_ms, gpu_telemetry")
    hosts = serializers.ListField(child=serializers.CharField())
    warnings = serializers.ListField(child=serializers.CharField())


class RuleFailureSerializer(serializers.Serializer):
    rule_id = serializers.CharField()
    error = serializers.CharField()


class SuppressionSerializer(serializers.Serializer):
    rule_id = serializers.CharField()
    root_cause = serializers.CharField(allow_blank=True)
    by = serializers.CharField()


class ReportSummarySerializer(serializers.Serializer):
    findings_by_severity = serializers.DictField(child=serializers.IntegerField())
    worst = serializers.CharField(allow_null=True, help_text="the highest severity found; null with no findings")
    violations = serializers.IntegerField()


class ReportSlisSerializer(serializers.Serializer):
    ttft_ms = serializers.FloatField(allow_null=True, help_text="time to first token: the first token-emitting step")
    gpu_busy_pct = serializers.FloatField(allow_null=True, help_text="steady-state GPU busy share (feature gpu_activity)")


class ReportSerializer(serializers.Serializer):
    """The diagnosis report: `tracedoc diagnose --format json` prints the same object."""
    version = serializers.IntegerField()
    trace = ReportTraceSerializer()
    findings = ReportFindingSerializer(many=True)
    violations = SLOOutcomeSerializer(many=True)
    clusters = ReportClusterSerializer(many=True)
    rule_errors = RuleFailureSerializer(many=True)
    suppressed = SuppressionSerializer(many=True)
    summary = ReportSummarySerializer()
    slis = ReportSlisSerializer(required=False, help_text="headline figures; absent in reports stored before them")


@extend_schema_field(ReportSerializer(allow_null=True))
class ReportField(serializers.JSONField):
    """The stored report as it is, typed as `Report` in the schema; null until the trace is done."""
