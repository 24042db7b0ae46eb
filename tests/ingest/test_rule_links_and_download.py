"""The trace and cluster pages link each finding's rule id to its page (the team's rule in
the editor, a builtin rule's page otherwise), and the trace page offers each stored artifact
as a download: team-scoped, an attachment under its own name, streamed, byte for byte."""
import gzip
import re

import pytest

from diagnosis.models import ClusterRecord
from rules.models import TeamRule
from tests.corpus import corpus
from tests.diagnosis.test_rediagnose import RULE, decode_trace  # noqa: F401  (decode_trace: a fixture)

pytestmark = pytest.mark.timeout(300)
RULE_LINK = re.compile(r'<a class="rule-link" href="([^"]+)"><code>([^<]+)</code></a>')


@pytest.fixture
def team_rule(infra, alice):
    return TeamRule.objects.create(team=infra, yaml=RULE, created_by=alice, updated_by=alice)


def test_rule_ids_link_to_the_rule(client, alice, team_rule, decode_trace):  # noqa: F811
    client.force_login(alice)
    links = dict((rule_id, url) for url, rule_id in RULE_LINK.findall(
        client.get(f"/traces/{decode_trace.pk}/").content.decode()))
    assert links["team.malloc-in-decode"] == f"/rules/{team_rule.pk}/edit/"
    builtin = {k: v for k, v in links.items() if k != "team.malloc-in-decode"}
    assert builtin and all(url == f"/rules/builtin/{rule_id}/" for rule_id, url in builtin.items())
    for url in links.values():
        assert client.get(url).status_code == 200

    cluster = ClusterRecord.objects.get(team=decode_trace.team, root_cause="team.malloc_in_decode")
    on_cluster = RULE_LINK.findall(client.get(f"/clusters/{cluster.pk}/").content.decode())
    assert (f"/rules/{team_rule.pk}/edit/", "team.malloc-in-decode") in on_cluster


def test_download_an_artifact(client, alice, charlie, decode_trace):  # noqa: F811
    client.force_login(alice)
    page = client.get(f"/traces/{decode_trace.pk}/").content.decode()
    artifact = decode_trace.artifacts.get(name="kineto_trace.json.gz")
    url = f"/traces/{decode_trace.pk}/artifacts/{artifact.pk}/download/"
    assert f'href="{url}"' in page
    response = client.get(url)
    assert response.status_code == 200 and response.streaming
    assert response["Content-Disposition"] == 'attachment; filename="kineto_trace.json.gz"'
    assert response["Content-Type"] == "application/octet-stream"
    body = b"".join(response.streaming_content)
    assert body == corpus("h200", "fragmented_decode", "kineto_trace.json.gz").read_bytes()
    assert gzip.decompress(body).lstrip()[:1] == b"{"

    client.force_login(charlie)  # another team
    assert client.get(url).status_code == 404
    client.logout()
    assert client.get(url).status_code == 302  # to the login page
    client.force_login(alice)
    other_trace_url = f"/traces/{decode_trace.pk + 1000}/artifacts/{artifact.pk}/download/"
    assert client.get(other_trace_url).status_code == 404
