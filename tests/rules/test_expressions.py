"""Condition and having expressions: one grammar, dataclass nodes, positions in errors."""
import pytest

from rules.engine.expressions import (Aggregate, And, Arithmetic, Compare, ExprError, Negate, Not, Number, Or, Quantified,
                               SelectionRef, Text, having_aggregates, parse_condition, parse_having)

SELECTIONS = ["errors", "benign", "filter_a", "filter_b"]


def test_condition_nodes():
    inner = Or((SelectionRef("benign"), Quantified(1, ("filter_a", "filter_b"))))
    assert parse_condition("errors and not (benign or 1 of filter_*)", SELECTIONS) == And((SelectionRef("errors"), Not(inner)))
    assert parse_condition("all of them", SELECTIONS) == Quantified("all", tuple(SELECTIONS))


def test_having_nodes_keep_precedence_and_associativity():
    node = parse_having("count - 1 - 2 * rate >= 10ms and first.host != 'h1' or not -max(dur) < 0")
    left = Arithmetic("-", Arithmetic("-", Aggregate("count"), Number(1.0)), Arithmetic("*", Number(2.0), Aggregate("rate")))
    assert node == Or((
        And((Compare(">=", left, Number(10_000_000.0)), Compare("!=", Aggregate("first", "host"), Text("h1")))),
        Not(Compare("<", Negate(Aggregate("max", "dur")), Number(0.0)))))
    assert having_aggregates(node) == {("count", None), ("rate", None), ("first", "host"), ("max", "dur")}


@pytest.mark.parametrize("text, message, offset", [
    ("errors benign", "unexpected 'benign'; combine terms with and / or", 7),
    ("(errors and benign", "expected ')' at the end", 18),
    ("errors and", "expected a selection name at the end", 10),
    ("2 errors", "expected 'of' after 2", 2),
    ("1.5 of filter_*", "'1.5': expected a whole number before 'of'", 0),
    ("1 of or", "expected selection names (e.g. sel_* or them) after 'of', found 'or'", 5),
    ("3 of filter_*", "can never hold", 0),
    ("1 of x*", "'x*' matches no selection", 5),
    ("errors % benign", "unexpected character '%'", 7),
])
def test_condition_errors_point_at_the_token(text, message, offset):
    with pytest.raises(ExprError) as e:
        parse_condition(text, SELECTIONS)
    assert message in e.value.message and e.value.offset == offset


@pytest.mark.parametrize("text, message, offset", [
    ("p99 > 1", "expected '(' after p99, found '>'", 4),
    ("p99(and) > 1", "expected a field name inside p99(...)", 4),
    ("count >", "expression ends too early", 7),
    ("bogus(dur) > 1", "unknown aggregate 'bogus'", 0),
    ("count > 10 parsecs", "unexpected 'parsecs'", 11),
    ("count > 10parsecs", "'10parsecs' is not a number", 8),
    ("max(_x) > 1", "'_x' is not a field name", 4),
])
def test_having_errors_point_at_the_token(text, message, offset):
    with pytest.raises(ExprError) as e:
        parse_having(text)
    assert message in e.value.message and e.value.offset == offset


@pytest.mark.parametrize("text", ["(" * 900 + "errors" + ")" * 900, "not " * 400 + "errors"])
def test_deep_nesting_is_an_error_not_a_recursion_error(text):
    with pytest.raises(ExprError, match="nests deeper than 32 levels"):
        parse_condition(text, SELECTIONS)
