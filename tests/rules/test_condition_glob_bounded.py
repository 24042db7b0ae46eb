"""`N of pattern` globs over selection names must not backtrack on crafted patterns."""
import time

import pytest

from rules.engine.expressions import And, ExprError, Not, Quantified, SelectionRef, parse_condition


def test_glob_with_many_stars_is_fast():
    selections = ["a" * 60, "errors"]
    started = time.perf_counter()
    with pytest.raises(ExprError, match="matches no selection"):
        parse_condition("1 of " + "a*" * 12 + "b", selections)
    assert time.perf_counter() - started < 1.0


def test_glob_still_matches_prefix_and_infix():
    node = parse_condition("errors and not 1 of f*_x*", ["errors", "filter_x1", "f_x", "other"])
    assert node == And((SelectionRef("errors"), Not(Quantified(1, ("filter_x1", "f_x")))))
