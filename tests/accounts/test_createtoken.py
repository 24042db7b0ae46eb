"""`manage.py createtoken`: user, team and membership made when missing; a new token each run."""
import io

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from accounts.models import Team


def createtoken(*args) -> str:
    out = io.StringIO()
    call_command("createtoken", *args, stdout=out)
    return out.getvalue().strip()


def api_status(token: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client.get("/api/v1/traces/").status_code


@pytest.mark.django_db
def test_creates_user_team_membership_and_a_working_token():
    token = createtoken("ci-bot", "--team", "inference")
    team = Team.objects.get(slug="inference")
    assert [u.username for u in team.members.all()] == ["ci-bot"]
    assert len(token) == 40 and api_status(token) == 200


@pytest.mark.django_db
def test_a_second_run_replaces_the_token():
    old = createtoken("ci-bot")
    new = createtoken("ci-bot")
    assert old != new
    assert (api_status(old), api_status(new)) == (401, 200)


@pytest.mark.django_db
def test_joins_an_existing_team_without_leaving_others():
    createtoken("ci-bot", "--team", "a")
    createtoken("ci-bot", "--team", "b")
    assert sorted(Team.objects.filter(members__username="ci-bot").values_list("slug", flat=True)) == ["a", "b"]
