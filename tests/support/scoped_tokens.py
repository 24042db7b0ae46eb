"""API clients holding a token of one scope (read < upload < admin), and a team setting (an SLO)
only an admin-scoped token may create."""
from rest_framework.test import APIClient

from accounts.models import ApiToken

SLO = {"slo_id": "ttft", "sli": "time_to_first_token", "objective": "max <= 1s"}


def client_for(user, scope: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {ApiToken.issue(user, name=scope, scope=scope)[1]}")
    return client
