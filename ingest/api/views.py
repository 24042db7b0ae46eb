"""Traces API: upload (optionally waiting for the diagnosis), list, detail.

The viewset here knows traces only; diagnosis/api/traces.py adds the report (the upload's
answer, `report`, `findings`) and tracedoc/api_traces.py the agent's idempotent bundles
(hosts.receipts): each layer extends the one below it, none imports one above.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from contextlib import contextmanager
from typing import Callable, Iterator

from django.conf import settings
from django.core.exceptions import ValidationError
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, parsers, serializers, status, viewsets
from rest_framework.response import Response

from accounts.models import Team
from ingest.api.problems import quota_exceeded, trace_failed, upload_too_large
from problems import PROBLEM_CONTENT_TYPE, ProblemSerializer, problem
from ingest.api.serializers import TraceDetailSerializer, TraceSerializer, TraceUploadSerializer
from ingest.api.throttles import UploadRateThrottle
from ingest.models import Trace
from ingest.uploads import (FULL_DISK, IDEMPOTENCY_HEADER, QuotaExceeded, StorageFull, create_trace, parse_labels,
                            team_for_upload)

WAIT_POLL_S = 0.5
RETRY_AFTER_S = 5  # what a 202 tells the client: poll the trace again in this many seconds


class WaitSlots:
    """The uploads of this process holding a web thread in `?wait=`: at most `per_user` of one
    user and `total` in all, so that one user's waits never take the threads other people's
    requests need (past them an upload answers 202 at once, as when its wait runs out)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_user: Counter = Counter()

    @contextmanager
    def hold(self, user_id: int, per_user: int, total: int) -> Iterator[bool]:
        with self._lock:
            granted = self._by_user[user_id] < per_user and sum(self._by_user.values()) < total
            if granted:
                self._by_user[user_id] += 1
        try:
            yield granted
        finally:
            if granted:
                with self._lock:
                    self._by_user[user_id] -= 1
                    if not self._by_user[user_id]:
                        del self._by_user[user_id]


WAIT_SLOTS = WaitSlots()


def _storage_full(e: StorageFull) -> Response:
    """RFC 4918's 507: the server cannot store what it was sent (nothing of it is kept)."""
    return problem(status.HTTP_507_INSUFFICIENT_STORAGE, "storage-full", "Not enough storage", str(e),
                   headers={"Retry-After": "300"})


def upload_schema(answer: type[serializers.Serializer]):
    """The OpenAPI of `POST /traces/` answering with `answer` (a layer above names its own)."""
    return extend_schema(
        request={"multipart/form-data": TraceUploadSerializer},
        responses={201: answer, 200: answer, 202: answer,
                   **{(code, PROBLEM_CONTENT_TYPE): ProblemSerializer for code in (400, 413, 422, 429, 507)}},
        parameters=[OpenApiParameter("wait", float, description=(
            "seconds to wait for the diagnosis, at most TRACEDOC_MAX_WAIT_SECONDS (10 by default; more "
            "is cut to it, so no request holds a web thread long; a web process holds at most "
            "TRACEDOC_MAX_WAITING_PER_USER (1) waiting uploads of one user and TRACEDOC_MAX_WAITING (2) in "
            "all, past which an upload answers 202 at once). Done in time: 201 with the report; "
            "still running: 202, `Location` names the trace, `Retry-After` says when to poll it, "
            "`progress` says how far it got; "
            "failed: 422, a problem document (application/problem+json) naming each file and "
            "why. Without it (or 0): 201 at once, the trace queued"))],
        description="Upload files as one trace. A repeated `Idempotency-Key` answers 200 with the "
                    "trace the first upload made.")


def receive_new(team: Team, key: str, create: Callable[[], Trace]) -> tuple[Trace, bool]:
    """Every upload makes a trace (the key is not kept here: tracedoc/api_traces.py receives
    through hosts.receipts, one trace per key)."""
    return create(), True


class TraceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                   viewsets.GenericViewSet):
    parser_classes = [parsers.MultiPartParser, parsers.FormParser]
    token_scopes = {"create": "upload"}  # accounts.permissions: an upload token may upload
    answer_serializer_class: type[serializers.Serializer] = TraceDetailSerializer  # what an upload answers
    receive = staticmethod(receive_new)  # (team, idempotency key, create) -> (trace, created)

    def get_queryset(self):
        qs = Trace.objects.visible_to(self.request.user).select_related("team", "created_by")
        if self.action == "list":
            qs = qs.listed()
            if state := self.request.query_params.get("state"):
                if state not in Trace.State.values:  # also a NUL byte, which PostgreSQL refuses
                    raise serializers.ValidationError(
                        {"state": f"one of {', '.join(Trace.State.values)}"})
                qs = qs.filter(state=state)
            for label in self.request.query_params.getlist("label"):
                if "\x00" in label:
                    raise serializers.ValidationError({"label": "key=value without NUL characters"})
                key, _, value = label.partition("=")
                qs = qs.with_label(key.strip(), value.strip())
        return qs

    def get_throttles(self):
        if self.action == "create":
            return [*super().get_throttles(), UploadRateThrottle()]
        return super().get_throttles()

    def get_serializer_class(self):
        return {"list": TraceSerializer, "create": TraceUploadSerializer}.get(self.action, TraceDetailSerializer)

    @upload_schema(TraceDetailSerializer)
    def create(self, request, *args, **kwargs):
        try:
            request.data  # noqa: B018 -- parse the body first: the upload handler flags an oversized upload
        except OSError as e:  # the upload's temporary files filled the disk
            if e.errno not in FULL_DISK:
                raise
            return _storage_full(StorageFull())
        if getattr(request, "upload_too_large", False):
            return upload_too_large(settings.TRACEDOC_MAX_UPLOAD_BYTES)
        upload = TraceUploadSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        data, wait = upload.validated_data, self._wait_seconds(request)
        try:
            labels = parse_labels(data.get("labels"))
            team = team_for_upload(request.user, data.get("team"), labels)
            # a repeated Idempotency-Key (an agent retrying a bundle) answers with the trace it made
            trace, created = self.receive(team, request.headers.get(IDEMPOTENCY_HEADER, ""), lambda: create_trace(
                team, request.user, data["files"], name=data.get("name", ""), labels=labels))
        except QuotaExceeded as e:
            return quota_exceeded(e.messages[0], e.quota, e.used, e.incoming)
        except StorageFull as e:
            return _storage_full(e)
        except ValidationError as e:
            raise serializers.ValidationError({"detail": e.messages}) from None
        if wait:
            with WAIT_SLOTS.hold(request.user.pk, settings.TRACEDOC_MAX_WAITING_PER_USER,
                                 settings.TRACEDOC_MAX_WAITING) as granted:
                trace = self._wait(trace, wait if granted else 0)
        if wait and trace.state == Trace.State.FAILED:
            return trace_failed(trace, request)
        answer = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        headers = {"Location": request.build_absolute_uri(reverse("api:trace-detail", args=[trace.pk]))}
        if wait and not trace.finished:
            answer = status.HTTP_202_ACCEPTED  # asked for the report, which is not there yet
            headers["Retry-After"] = str(RETRY_AFTER_S)
        return Response(self.answer_serializer_class(trace, context={"request": request}).data, status=answer,
                        headers=headers)

    @staticmethod
    def _wait_seconds(request) -> float:
        raw = request.query_params.get("wait") or "0"
        try:
            return max(0.0, min(float(raw), settings.TRACEDOC_MAX_WAIT_SECONDS))
        except ValueError:
            raise serializers.ValidationError({"wait": "seconds, a number"}) from None

    @staticmethod
    def _wait(trace: Trace, seconds: float) -> Trace:
        deadline = time.monotonic() + seconds
        while not trace.finished and time.monotonic() < deadline:
            time.sleep(WAIT_POLL_S)
            trace.refresh_from_db()
        return trace
