"""The trace and cluster pages link each finding's rule id to its page: the team's rule in
the editor, a builtin rule's page otherwise."""
import re

import pytest

from diagnosis.models import ClusterRecord
from rules.models import TeamRule
from tests.support.rule_texts import MALLOC_IN_DECODE as RULE

pytestmark = pytest.mark.timeout(300)
RULE_LINK = re.compile(r'<a class="rule-link" href="([^"]+)"><code>([^<]+)</code></a>')


@pytest.fixture
def team_rule(infra, alice):
    return TeamRule.objects.create(team=infra, yaml=RULE, created_by=alice, updated_by=alice)


def test_rule_ids_link_to_the_rule(client, alice, team_rule, decode_trace):
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
