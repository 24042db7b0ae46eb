"""In a real browser: the rule editor shows every error of a rule as a gutter marker and an
underline at its line and column, completes keys and modifiers, and a test run against a
corpus trace lists each selection's row count. Screenshots land in test-artifacts/browser/."""
import gzip
import json

import pytest

from tests.corpus import corpus
from tests.support.fixtures import SHOTS
from tests.support.fixtures import log_in
from tests.support.rule_editor_page import type_rule
from tests.support.rule_texts import MALLOC_IN_DECODE as RULE, where

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

TWO_MISTAKES = RULE.replace("    name: cudaMalloc", "    name|bogus: cudaMalloc\n  frees:\n    nosuchcol: 3") \
    .replace("condition: mallocs", "condition: mallocs or frees")
QUIET = RULE.replace("    name: cudaMalloc", "    name: cudaMalloc\n  frees:\n    kind: runtime\n    name: noSuchCall") \
    .replace("condition: mallocs", "condition: mallocs and frees")


def test_two_errors_two_markers_and_per_selection_counts(decode_trace, trial_worker, live_server, browser):
    # decode_trace first: the database is not usable once Playwright runs its event loop
    events = json.loads(gzip.decompress(corpus("h200", "fragmented_decode", "kineto_trace.json.gz").read_bytes()))
    mallocs = sum(1 for e in events["traceEvents"] if e.get("name") == "cudaMalloc" and e.get("ph") == "X")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    log_in(page, live_server.url + "/rules/new/")
    page.wait_for_selector(".rule-code .cm-editor")
    assert page.locator("#id_yaml").is_hidden()

    type_rule(page, TWO_MISTAKES)
    page.wait_for_selector("#validation .error-count >> text=2 errors")
    page.wait_for_function("document.querySelectorAll('.cm-lintRange-error').length === 2")
    assert page.locator(".cm-gutter-lint .cm-lint-marker-error").count() == 2
    listed = page.locator("#validation li.rule-error").all_inner_texts()
    assert [t.split(":")[0] for t in listed] == [where(TWO_MISTAKES, "name|bogus"), where(TWO_MISTAKES, "nosuchcol")]
    underlined = page.locator(".cm-lintRange-error").all_inner_texts()
    assert underlined == ["name|bogus", "nosuchcol"]
    page.screenshot(path=str(SHOTS / "rule_editor_two_errors.png"), full_page=True)

    # completion: a top-level key from the schema, a modifier from the registry
    page.keyboard.press("Control+End")
    page.keyboard.press("Enter")
    page.keyboard.type("sev")
    page.keyboard.press("Control+Space")
    assert "severity" in page.wait_for_selector(".cm-tooltip-autocomplete").inner_text()
    page.screenshot(path=str(SHOTS / "rule_editor_completion.png"))
    page.keyboard.press("Escape")

    type_rule(page, QUIET)
    assert "valid: team.malloc-in-decode v1" in page.wait_for_selector("#validation .ok").inner_text()
    assert page.locator(".cm-lintRange-error").count() == 0
    page.select_option("#id_trace", str(decode_trace.pk))
    option = page.locator(f"#id_trace option[value='{decode_trace.pk}']").inner_text()
    assert "uploaded " in option and "kineto" in option
    page.click("#test-form button[type=submit]")
    result = page.wait_for_selector("#test-result .rule-trial[data-state=done] .test-result", timeout=60_000)
    assert "no finding" in result.inner_text()
    counts = {row.get_attribute("data-selection"): row.locator("td").nth(2).inner_text()
              for row in page.locator("tr.selection-count").all()}
    assert counts == {"mallocs": str(mallocs), "frees": "0"}
    assert page.locator(".selection-rows td", has_text="cudaMalloc").count() == 5
    page.screenshot(path=str(SHOTS / "rule_editor_counts.png"), full_page=True)
