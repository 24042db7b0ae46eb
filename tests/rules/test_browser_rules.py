"""In a real browser: write a team rule with a mistake, see the line/column error appear
through htmx while typing, fix it, test it on a finished trace, save it, toggle it in the
list; then read the per-step latency chart of that trace. Screenshots land in
test-artifacts/browser/."""
import gzip
import json

import pytest

from tests.corpus import corpus
from tests.support.fixtures import SHOTS, log_in
from tests.support.rule_editor_page import type_rule
from tests.support.rule_texts import MALLOC_IN_DECODE as RULE, where

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

TYPO = RULE.replace("condition: mallocs", "condition: malocs")


def test_write_test_and_save_a_rule_then_read_the_latency_chart(decode_trace, trial_worker, live_server, browser):
    # decode_trace first: the database is not usable once Playwright runs its event loop
    events = json.loads(gzip.decompress(corpus("h200", "fragmented_decode", "kineto_trace.json.gz").read_bytes()))
    mallocs = sum(1 for e in events["traceEvents"] if e.get("name") == "cudaMalloc" and e.get("ph") == "X")
    assert mallocs == 289  # the corpus README: about 289 cudaMalloc calls
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    log_in(page, live_server.url + "/rules/new/")
    page.wait_for_url("**/rules/new/")

    type_rule(page, TYPO)  # htmx validates 400 ms after the editor's text stops changing
    error = page.wait_for_selector(f"#validation li.rule-error:has-text('{where(TYPO, 'malocs')}')")
    assert "malocs" in error.inner_text()
    page.screenshot(path=str(SHOTS / "rule_editor_error.png"), full_page=True)

    type_rule(page, RULE)
    assert "valid: team.malloc-in-decode v1" in page.wait_for_selector("#validation .ok").inner_text()
    page.select_option("#id_trace", str(decode_trace.pk))
    page.click("#test-form button[type=submit]")
    result = page.wait_for_selector("#test-result .rule-trial[data-state=done] .test-result", timeout=60_000).inner_text()
    assert f"{mallocs} cudaMalloc call(s)" in result, result
    page.screenshot(path=str(SHOTS / "rule_editor_test.png"), full_page=True)

    page.click("#rule-form button[type=submit]")
    page.wait_for_url("**/rules/")
    row = page.locator("#team-rules tr", has_text="team.malloc-in-decode")
    assert "v1" in row.inner_text()
    with page.expect_response(lambda r: "/toggle/" in r.url and r.status == 200):
        row.locator("button.toggle").click()
    page.wait_for_selector("#team-rules button.toggle.off")
    page.screenshot(path=str(SHOTS / "rule_list.png"), full_page=True)
    row.locator("a").click()
    page.wait_for_url("**/rules/*/edit/")
    assert "Version history" in page.content() and page.input_value("#id_yaml") == RULE
    page.screenshot(path=str(SHOTS / "rule_edit.png"), full_page=True)
    page.goto(live_server.url + "/rules/builtin/allocator.churn/")
    assert "root_cause: allocator.churn" in page.locator("pre.rule-source").inner_text()
    page.screenshot(path=str(SHOTS / "rule_builtin.png"), full_page=True)

    page.goto(f"{live_server.url}/traces/{decode_trace.pk}/")
    chart = page.locator("#latency-chart")
    assert "Per-step latency" in chart.inner_text()
    assert chart.locator("circle.point").count() == len(corpus("h200", "fragmented_decode",
                                                              "token_latency.jsonl").read_text().splitlines())
    chart.screenshot(path=str(SHOTS / "latency_chart.png"))
    page.screenshot(path=str(SHOTS / "trace_fragmented_decode.png"), full_page=True)
