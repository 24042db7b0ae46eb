"""In a real browser: the rule editor's backtest button, with a new version of a quiet team
rule typed in the editor, lists the finding and the cluster it would add on the team's
diagnosed trace and the rows its selection now matches -- and, typed back to a version that
fires on nothing, no change; nothing is saved. Screenshots land in test-artifacts/browser/."""
import pytest

from rules.models import TeamRule
from tests.support.fixtures import SHOTS
from tests.support.fixtures import log_in
from tests.support.rule_editor_page import type_rule
from tests.support.rule_texts import FIRING, QUIET

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture
def quiet_rule(infra, alice):
    return TeamRule.objects.create(team=infra, yaml=QUIET, created_by=alice, updated_by=alice)


def test_the_backtest_button_shows_the_difference(quiet_rule, decode_trace, trial_worker, live_server, browser):
    # the database first: it is not usable once Playwright runs its event loop
    rule_pk, trace_pk = quiet_rule.pk, decode_trace.pk
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    log_in(page, f"{live_server.url}/rules/{rule_pk}/edit/")
    page.wait_for_selector(".rule-code .cm-editor")

    type_rule(page, FIRING)
    page.wait_for_selector("#validation .ok")
    page.click("#backtest-form button[type=submit]")  # a trial on the worker: the pane polls it until it is done
    page.wait_for_selector("#backtest-result .rule-trial[data-state=queued], #backtest-result .rule-trial[data-state=running]")
    page.wait_for_selector("#backtest-result .rule-trial[data-state=done] .backtest-table", timeout=120_000)
    added = page.locator("#backtest-result [data-change=added]")
    rows = [added.nth(i).inner_text() for i in range(added.count())]
    assert any("finding" in r and "team.malloc-in-decode" in r and "v2" in r for r in rows), rows
    assert any("cluster" in r and "team.malloc_in_decode" in r for r in rows), rows
    assert page.locator("#backtest-result [data-change=removed]").count() == 0
    assert page.locator(f"#backtest-result a[href='/traces/{trace_pk}/']").count() == 1
    assert "v2 against the rules as they were (without this rule) and against its saved v1, on 1 trace" in \
        page.locator("#backtest-result .meta").inner_text()
    # the quiet v1 matched no row; the text in the editor matches every cudaMalloc call
    matched = page.locator("#backtest-result [data-change=matches-changed] .match-count").inner_text()
    assert matched.startswith("0 → ") and not matched.startswith("0 → 0"), matched
    page.screenshot(path=str(SHOTS / "rule_backtest_added.png"), full_page=True)

    type_rule(page, QUIET.replace("version: 1", "version: 2"))
    page.wait_for_selector("#validation .ok")
    with page.expect_response(lambda r: "/backtest/" in r.url):
        page.click("#backtest-form button[type=submit]")
    page.wait_for_selector("#backtest-result .unchanged", timeout=120_000)
    assert page.locator("#backtest-result :is([data-change=added], [data-change=removed], "
                        "[data-change=changed], [data-change=matches-changed])").count() == 0
    page.goto(f"{live_server.url}/rules/{rule_pk}/edit/")  # nothing was saved: still v1
    assert "v1" in page.locator("h1 .tag").first.inner_text()
