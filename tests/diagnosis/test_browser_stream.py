"""In a real browser: the issue stream of four incidents and a repeat, narrowed by a label
term in the search bar and a sort, a bulk acknowledge, then the cluster page (recurrence, hosts, activity).
Screenshots land in test-artifacts/browser/."""
import pytest

from diagnosis.models import ClusterRecord
from tests.support.cluster_world import COLD, GRAPH, NCCL, OOM, days_ago, seen
from tests.support.fixtures import SHOTS, log_in

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture
def incidents(infra, alice):
    seen(infra, NCCL, at=days_ago(6), labels={"host": "gpu-a", "env": "prod", "team": "infra"})
    seen(infra, NCCL, OOM, at=days_ago(2), labels={"host": "gpu-b", "env": "prod"})
    seen(infra, GRAPH, COLD, at=days_ago(1), labels={"host": "gpu-c", "env": "staging"})
    seen(infra, OOM, at=days_ago(0), labels={"host": "gpu-b", "env": "prod"})
    return {c.fingerprint: c.pk for c in ClusterRecord.objects.filter(team=infra)}


def test_filter_the_stream_act_in_bulk_and_read_a_cluster(incidents, live_server, browser):
    # incidents first: the database is not usable once Playwright runs its event loop
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    log_in(page, live_server.url + "/clusters/")
    page.wait_for_url("**/clusters/")
    assert page.locator("tr.cluster-row").count() == 3  # the info cold start opened none

    page.fill("#stream-query", "is:unresolved label:env=prod")
    page.select_option("#stream-sort", "count")
    page.click("#stream-search button[type=submit]")
    page.wait_for_url("**label%3Aenv%3Dprod**")
    rows = page.locator("tr.cluster-row")
    assert rows.count() == 2
    assert "memory.oom" in rows.nth(0).inner_text()  # two traces, and newer than nccl's second
    nccl = page.locator(f"#cluster-row-{incidents['fp-nccl']}")
    assert "gpu-a" in nccl.inner_text() and "gpu-b" in nccl.inner_text()
    assert nccl.locator(".recurrence rect").count() == 2  # two days with a trace
    assert page.locator(f"#cluster-row-{incidents['fp-oom']} .marker-new").count() == 1
    page.screenshot(path=str(SHOTS / "cluster_stream_filtered.png"), full_page=True)

    page.check(f"#cluster-row-{incidents['fp-nccl']} input[name=clusters]")
    page.check(f"#cluster-row-{incidents['fp-oom']} input[name=clusters]")
    page.select_option("#bulk-form select[name=status]", "acknowledged")
    page.click("#bulk-form button[type=submit]")
    page.wait_for_selector(".messages >> text=2 cluster(s) set to acknowledged")
    assert "label%3Aenv%3Dprod" in page.url  # back on the same filtered stream
    statuses = page.locator("tr.cluster-row select[name$='-status']")
    assert [statuses.nth(i).input_value() for i in range(statuses.count())] == ["acknowledged", "acknowledged"]

    page.click(f"#cluster-row-{incidents['fp-nccl']} a")
    page.wait_for_selector("#activity")
    assert "gpu-a" in page.locator("#recurrence").inner_text()
    assert page.locator("#traces tbody tr").count() == 2
    assert "open → acknowledged" in page.locator("#activity").inner_text()
    page.fill("#activity textarea", "switch port flapping on rack 7")
    page.click("#activity button[type=submit]")
    page.wait_for_selector("#activity >> text=switch port flapping on rack 7")
    page.screenshot(path=str(SHOTS / "cluster_detail.png"), full_page=True)
