"""The JSON report's OpenAPI components, generated from the msgspec Structs that define it
(diagnosis.engine.results.report_schema_components): the schema a client gets cannot drift from what
`Report.to_json()` writes. This module only adapts JSON Schema to drf-spectacular's OpenAPI 3.0.

`ReportSerializer` is a name for drf-spectacular (`ReportComponents` describes it); the stored
report is answered as it is (`ReportField`), never re-serialized, so a key added to the report
cannot be dropped on the way out."""
from __future__ import annotations

import functools
import inspect
from typing import Any

import msgspec
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from diagnosis.engine import results
from rules.engine.capture_plans import CapturePlan
from rules.engine.results import Evidence, Finding

# component names as the API has published them (a generated client's model names), where a
# Struct's own name would take another component's (Finding, Cluster are the team's records)
NAMES = {"Finding": "ReportFinding", "Cluster": "ReportCluster", "ArtifactEntry": "ReportArtifact",
         "TraceSummary": "ReportTrace", "Summary": "ReportSummary", "Violation": "SLOViolation",
         "CapturePlan": "ReportCapturePlan"}
STRUCTS = (results.Report, results.TraceSummary, results.ArtifactEntry, Finding, Evidence, CapturePlan,
           results.Cluster, results.Violation, results.FailedSLO, results.RuleFailure, results.Suppression,
           results.Summary)
OPTIONAL = {("Report", "slis")}  # absent in reports stored before it (served as they were)


@functools.cache
def openapi_components() -> dict[str, dict[str, Any]]:
    """Component name -> OpenAPI 3.0 schema of the report and every type in it."""
    components = msgspec.json.decode(msgspec.json.encode(results.report_schema_components()))
    written = {s.__name__: _always_written(s) for s in STRUCTS}
    out = {}
    for name, schema in components.items():
        schema = _openapi(schema)
        schema.pop("title", None)
        if "description" in schema:
            schema["description"] = inspect.cleandoc(schema["description"])
        schema["required"] = [k for k in schema.get("properties", {}) if k in written[name]]
        out[NAMES.get(name, name)] = schema
    return out


def _always_written(struct: type) -> set[str]:
    """The keys every encoding of the Struct writes (not UNSET-able, not omitted at a default)."""
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    omit_defaults = struct.__struct_config__.omit_defaults
    return {f.encode_name for f in info.fields if f.required or (
        (struct.__name__, f.name) not in OPTIONAL and not omit_defaults
        and not (f.default is msgspec.NODEFAULT and f.default_factory is msgspec.NODEFAULT))}  # that: UNSET


def _openapi(node: Any) -> Any:
    """JSON Schema -> OpenAPI 3.0: a null alternative as `nullable`, a fixed-length tuple as an
    array of its length, references renamed."""
    if isinstance(node, list):
        return [_openapi(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: _openapi(v) for k, v in node.items()}
    if "$ref" in node:
        prefix, _, name = node["$ref"].rpartition("/")
        node["$ref"] = f"{prefix}/{NAMES.get(name, name)}"
    alternatives = node.get("anyOf")
    if alternatives and {"type": "null"} in alternatives:
        rest = [a for a in alternatives if a != {"type": "null"}]
        del node["anyOf"]
        if len(rest) == 1 and "$ref" not in rest[0]:
            node.update(rest[0])
        else:
            node["anyOf" if len(rest) > 1 else "allOf"] = rest
        node["nullable"] = True
    if "prefixItems" in node:
        kinds = node.pop("prefixItems")
        node["items"] = kinds[0] if all(k == kinds[0] for k in kinds) else {"anyOf": kinds}
    return node


class ReportSerializer(serializers.Serializer):
    """The diagnosis report (`ReportComponents` gives its schema)."""


class ReportComponents(OpenApiSerializerExtension):
    target_class = ReportSerializer

    def get_name(self, auto_schema, direction) -> str:
        return "Report"

    def map_serializer(self, auto_schema, direction) -> dict[str, Any]:
        components = openapi_components()
        for name, schema in components.items():
            if name != "Report":
                auto_schema.registry.register_on_missing(
                    ResolvedComponent(name, ResolvedComponent.SCHEMA, schema=schema, object=name))
        return components["Report"]


@extend_schema_field(ReportSerializer(allow_null=True))
class ReportField(serializers.JSONField):
    """The stored report as it is, typed as `Report` in the schema; null until the trace is done."""
