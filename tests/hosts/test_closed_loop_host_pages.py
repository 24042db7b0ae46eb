"""The Hosts pages tell the closed loop's orders from people's on-demand requests: the host's
page marks each request's origin (the loop's with its cluster and rule and when the hook takes
it), the host list counts the outstanding ones of each origin."""
import re
from html import unescape


def words(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_the_host_page_marks_the_origin_of_each_request(world, alice_client):
    html = alice_client.get(f"/hosts/{world.done.host_id}/").content.decode()
    rows = dict(re.findall(r'<tr data-capture="(\d+)">(.*?)</tr>', html, re.S))
    assert set(rows) == {str(world.done.pk), str(world.by_person.pk)}
    auto = rows[str(world.done.pk)]
    assert '<span class="tag origin-auto">closed loop</span>' in auto
    assert f'href="/clusters/{world.cluster.pk}/#closed-loop"' in auto and "<code>latency.jitter</code>" in auto
    assert "taken at the next step over 1.5x the running median" in words(auto)
    person = rows[str(world.by_person.pk)]
    assert '<span class="tag origin-person">on demand</span>' in person and "by alice" in words(person)
    assert "closed loop" not in person


def test_the_host_list_counts_outstanding_requests_by_origin(world, alice_client):
    html = alice_client.get("/hosts/").content.decode()
    rows = dict(re.findall(r'<tr class="[^"]*" data-host="([^"]+)">(.*?)</tr>', html, re.S))
    assert "1 on demand" in words(rows["gpu-7"]) and "closed loop" not in words(rows["gpu-7"])  # its order is done
    assert "1 closed loop" in words(rows["gpu-8"]) and "on demand" not in words(rows["gpu-8"])


def test_the_host_list_answer_of_the_api_is_unchanged(world, alice):
    from tests.support.fixtures import token_client
    [row] = [r for r in token_client(alice).get("/api/v1/hosts/").json() if r["host"] == "gpu-8"]
    assert "outstanding" not in row
