"""Accounts API: the caller's API tokens, and the audit log of their teams.

  GET    /api/v1/tokens/          the caller's tokens (never a key)
  POST   /api/v1/tokens/          issue one: name, scope (read | upload | admin), expires_days; the
                                  answer holds the key, once
  GET    /api/v1/tokens/{id}/
  DELETE /api/v1/tokens/{id}/     revoke it (the row stays, for the audit log)
  GET    /api/v1/audit/           changes to rules, SLOs, tokens, cluster triage: ?object_type=
                                  &action=&actor=&team=&object_id=&since=&until=
"""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.response import Response

from accounts.models import ApiToken, AuditEntry
from accounts.serializers import (ApiTokenCreateSerializer, ApiTokenSerializer, AuditEntrySerializer,
                                  AuditQuerySerializer, IssuedApiTokenSerializer)


class ApiTokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                      mixins.DestroyModelMixin, viewsets.GenericViewSet):
    serializer_class = ApiTokenSerializer
    queryset = ApiToken.objects.none()  # the schema's type for {id}; get_queryset keeps the caller's

    def get_queryset(self):
        return ApiToken.objects.filter(user=self.request.user).order_by("-created_at", "-id")

    @extend_schema(request=ApiTokenCreateSerializer, responses={201: IssuedApiTokenSerializer})
    def create(self, request, *args, **kwargs):
        body = ApiTokenCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        token, key = body.issue(request.user)
        token.key = key
        return Response(IssuedApiTokenSerializer(token).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request, *args, **kwargs):
        """Revoke the token: it stops working at once; it stays listed as revoked."""
        self.get_object().revoke()
        return Response(status=status.HTTP_204_NO_CONTENT)


class AuditEntryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = AuditEntrySerializer
    queryset = AuditEntry.objects.none()

    def get_queryset(self):
        qs = AuditEntry.objects.visible_to(self.request.user).select_related("team")
        if self.action != "list":
            return qs
        query = AuditQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        return query.apply(qs)

    @extend_schema(parameters=[AuditQuerySerializer])
    def list(self, request, *args, **kwargs):
        """Newest first: who changed what, when (field -> [before, after])."""
        return super().list(request, *args, **kwargs)
