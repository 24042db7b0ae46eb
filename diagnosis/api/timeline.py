"""Timeline API of a diagnosed trace: one view with server-side level of detail, the place
of an evidence row, a range exported for Perfetto, and a log file's lines around one line."""
from __future__ import annotations

import orjson
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response
from rest_framework.views import APIView

from diagnosis.engine.timeline.export import chrome_trace
from diagnosis.engine.timeline.search import DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY_CHARS, search
from diagnosis.timeline_store import StoredTimeline, timeline_for
from diagnosis.engine.timeline.view import DEFAULT_MAX_ITEMS, MAX_ITEMS_LIMIT, locate, view
from ingest.engine.events import INT64_MAX, INT64_MIN
from ingest.engine.io import open_stream
from ingest.api.problems import TRACE_NOT_DONE
from problems import problem
from ingest.models import Artifact, Trace

MAX_CONTEXT_LINES = 200
MAX_LINE_BYTES = 4096  # a longer line is cut (a file with no newlines is not read whole)


class RangeQuery(serializers.Serializer):
    start_ns = serializers.IntegerField(required=False, min_value=INT64_MIN, max_value=INT64_MAX,
                                        help_text="absolute ns on the report's clock")
    end_ns = serializers.IntegerField(required=False, min_value=INT64_MIN, max_value=INT64_MAX)
    max_items = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ITEMS_LIMIT,
                                         default=DEFAULT_MAX_ITEMS)
    # blank = not given, as a query string's empty value is
    artifact = serializers.CharField(required=False, allow_blank=True, help_text="with loc: find this evidence row")
    loc = serializers.CharField(required=False, allow_blank=True)

    def validate(self, data):
        if "start_ns" in data and "end_ns" in data and data["end_ns"] <= data["start_ns"]:
            raise serializers.ValidationError("end_ns must be after start_ns")
        return data


def _diagnosed_trace(request, pk: int) -> Trace:
    """Another team's trace is a 404, as on every trace endpoint."""
    return get_object_or_404(Trace.objects.visible_to(request.user), pk=pk)


def _not_ready(trace: Trace) -> Response | None:
    if trace.state != Trace.State.DONE:
        return problem(409, TRACE_NOT_DONE, "The trace is not diagnosed yet",
                       f"the trace is {trace.state}: its timeline exists once it is diagnosed")
    return None


def _indexed(request, pk: int, query_class: type[serializers.Serializer]):
    """(trace, its stored timeline, the checked query) or the refusal to answer: 404 for
    another team's trace, 409 before the diagnosis, 400 for a bad query."""
    trace = _diagnosed_trace(request, pk)
    if refused := _not_ready(trace):
        return refused
    query = query_class(data=request.query_params)
    query.is_valid(raise_exception=True)
    return trace, timeline_for(trace), query.validated_data


def _json(body: dict) -> HttpResponse:
    # orjson: a 2,000-item view encodes in ~2 ms, the stdlib encoder takes ~10x that
    return HttpResponse(orjson.dumps(body), content_type="application/json")


def _documented(endpoint: type["_TimelineEndpoint"]) -> type["_TimelineEndpoint"]:
    """The endpoint's query parameters and answers in the OpenAPI schema."""
    return extend_schema_view(get=extend_schema(parameters=[endpoint.query_class],
                                                responses={200: OpenApiTypes.OBJECT, 409: OpenApiTypes.OBJECT}))(endpoint)


class _TimelineEndpoint(APIView):
    """A GET on a diagnosed trace's timeline: `answer` gets the trace, its timeline and the
    checked `query_class` query."""
    query_class: type[serializers.Serializer] = RangeQuery

    def get(self, request, pk: int):
        indexed = _indexed(request, pk, self.query_class)
        return indexed if isinstance(indexed, Response) else self.answer(*indexed)

    def answer(self, trace: Trace, timeline: StoredTimeline, q: dict) -> HttpResponse:
        raise NotImplementedError


@_documented
class TimelineView(_TimelineEndpoint):
    """`GET /api/v1/traces/{id}/timeline/?start_ns=&end_ns=&max_items=`: lanes per host ->
    device -> stream and host -> process -> thread, log files, telemetry curves, per-step
    latency and finding / violation bands, with at most `max_items` items: where a lane has
    more events than its share, equal slices of the range are merged into one span each
    (`count` > 1, `busy_ns`). Item times are ns after `origin_ns`. With `artifact` and `loc`
    the answer's `found` says where that event is (lane, ts, dur, row). `missing` names the
    files the report names whose events are not stored (no lanes), `message` says so."""

    def answer(self, trace: Trace, timeline: StoredTimeline, q: dict) -> HttpResponse:
        index = timeline.index
        body = view(index, q.get("start_ns"), q.get("end_ns"), q["max_items"]).to_dict()
        body["missing"], body["message"] = list(timeline.missing), timeline.message
        if q.get("artifact") and q.get("loc"):
            found = locate(index, q["artifact"], q["loc"])
            body["found"] = found.to_dict() if found else None
        return _json(body)


@_documented
class TimelineExportView(_TimelineEndpoint):
    """`GET /api/v1/traces/{id}/timeline/export/?start_ns=&end_ns=`: the range as Chrome
    trace JSON (Perfetto opens it), every event, not merged."""

    def answer(self, trace: Trace, timeline: StoredTimeline, q: dict) -> HttpResponse:
        index = timeline.index
        start = q.get("start_ns", index.start_ns)
        end = q.get("end_ns", index.end_ns + 1)
        response = _json(chrome_trace(index, start, end))
        response["Content-Disposition"] = f'attachment; filename="trace-{trace.pk}-{start}-{end}.json"'
        return response


class SearchQuery(serializers.Serializer):
    q = serializers.CharField(max_length=MAX_QUERY_CHARS, help_text="part of an event's name, any case")
    offset = serializers.IntegerField(required=False, min_value=0, default=0, help_text="the first match to list")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT, default=DEFAULT_LIMIT)


@_documented
class TimelineSearchView(_TimelineEndpoint):
    """`GET /api/v1/traces/{id}/timeline/search/?q=&offset=&limit=`: the events whose name
    contains `q` (ignoring case), in time order: `total` of them, `matches` from `offset`
    (lane, ts after `origin_ns`, dur, row, name, kind), and the matching names with the most
    events. The page asks here because it holds only a merged summary of a big trace."""

    query_class = SearchQuery

    def answer(self, trace: Trace, timeline: StoredTimeline, q: dict) -> HttpResponse:
        body = search(timeline.index, q["q"], q["offset"], q["limit"]).to_dict()
        body["origin"] = str(timeline.index.start_ns)
        return _json(body)


class LogLinesQuery(serializers.Serializer):
    artifact = serializers.CharField()
    line = serializers.IntegerField(min_value=1)
    context = serializers.IntegerField(min_value=0, max_value=MAX_CONTEXT_LINES, default=10)


class LogLinesView(APIView):
    """`GET /api/v1/traces/{id}/lines/?artifact=&line=&context=`: the lines of a stored text
    file around one line (an evidence location such as `rank0.log:line 112`)."""

    @extend_schema(parameters=[LogLinesQuery], responses={200: OpenApiTypes.OBJECT, 404: OpenApiTypes.OBJECT})
    def get(self, request, pk: int):
        trace = _diagnosed_trace(request, pk)
        query = LogLinesQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        artifact = trace.artifacts.exclude(format__in=Artifact.CONTAINERS).filter(name=q["artifact"]).first()
        if artifact is None:
            raise NotFound(f"the trace has no file {q['artifact']!r}")
        first, last = max(1, q["line"] - q["context"]), q["line"] + q["context"]
        lines = []
        with open_stream(artifact.open_blob(), artifact.name) as stream:  # S3: fetched as it is read
            number = 0
            while number < last:
                raw = stream.readline(MAX_LINE_BYTES)
                if not raw:
                    break
                if len(raw) == MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    while (rest := stream.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                        pass  # the rest of an over-long line: skipped, so line numbers stay right
                number += 1
                if number >= first:
                    lines.append({"line": number, "text": raw.decode("utf-8", "replace").rstrip("\r\n")})
        return _json({"artifact": artifact.name, "line": q["line"], "lines": lines})
