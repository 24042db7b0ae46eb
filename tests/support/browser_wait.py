"""Waiting in a browser test for a condition in the page, under the app's CSP.

Playwright's `page.wait_for_function` compiles its predicate inside the page (`new Function`),
which the Content-Security-Policy (no 'unsafe-eval') refuses; `page.evaluate` runs through the
DevTools protocol, which the policy does not cover, so polling with it works."""
from __future__ import annotations

import time


def wait_for_js(page, expression: str, timeout_s: float = 30.0, every_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise TimeoutError(f"still false after {timeout_s} s: {expression}")
        time.sleep(every_s)
