"""A `team=` label places the trace in that team when the uploader belongs to it; otherwise
the upload is refused with a message that says why, and nothing is stored."""
import io

import pytest

from accounts.models import Team
from ingest.models import Trace


@pytest.fixture
def serving(alice):
    team = Team.objects.create(name="Serving", slug="serving")
    team.members.add(alice)
    return team


def upload(api, labels: str, **fields):
    f = io.BytesIO(b"some log line\n")
    f.name = "a.log"
    return api.post("/api/v1/traces/", {"files": [f], "labels": labels, **fields}, format="multipart")


def test_the_label_places_the_trace_in_a_team_of_the_uploader(alice_api, infra, serving):
    response = upload(alice_api, "team=serving, env=prod")
    assert response.status_code == 201, response.content
    assert Trace.objects.get(pk=response.json()["id"]).team == serving


def test_a_team_the_uploader_is_not_in_is_refused(charlie_api, serving):
    response = upload(charlie_api, "team=serving")
    assert response.status_code == 400
    assert "team='serving' names a team you are not a member of" in str(response.json())
    assert not Trace.objects.exists()


def test_a_label_contradicting_the_chosen_team_is_refused(alice_api, infra, serving):
    response = upload(alice_api, "team=serving", team="infra")
    assert response.status_code == 400 and "choose that team or drop the label" in str(response.json())
    assert not Trace.objects.exists()


def test_the_upload_form_too(client, alice, infra, serving):
    client.force_login(alice)
    f = io.BytesIO(b"line\n")
    f.name = "a.log"
    response = client.post("/traces/new/", {"files": [f], "labels": "team=serving", "team": "serving"})
    assert response.status_code == 302
    assert Trace.objects.get().team == serving
