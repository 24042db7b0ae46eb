"""Driving the rule editor (CodeMirror 6 over a hidden textarea) from Playwright."""


def type_rule(page, text: str) -> None:
    """Replace the editor's text with `text`, as one input (no auto-indent of typed newlines)."""
    page.locator(".rule-code .cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(text)

