"""Conditions: and, or, not, parentheses, N of / all of / them."""
import pytest

from tests.rules.helpers import S, count, events


@pytest.fixture(scope="module")
def frame():
    names = ["a", "b", "c", "ab", "abc"]
    return events([{"ts": (i + 1) * S, "kind": "marker", "name": n} for i, n in enumerate(names)])


SELECTIONS = """
match:
  has_a: {name|contains: a}
  has_b: {name|contains: b}
  has_c: {name|contains: c}
"""


@pytest.mark.parametrize("condition, expected", [
    ("has_a and has_b and has_c", 1),           # abc
    ("has_a or has_b or has_c", 5),
    ("has_a and not has_b and not has_c", 1),   # a
    ("not has_a and (has_b or has_c)", 2),      # b, c
    ("(has_a or has_b) and not (has_c)", 3),    # a, b, ab
    ("1 of has_*", 5),
    ("2 of has_*", 2),                          # ab, abc
    ("all of has_*", 1),
    ("any of them and not all of them", 4),
    ("not not has_c and (has_a or has_b)", 1),
])
def test_condition(frame, condition, expected):
    assert count(SELECTIONS + f"condition: {condition}\n", frame) == expected


def test_attrs_are_parsed_only_for_rows_that_survive_cheap_tests(monkeypatch):
    from rules.engine import attrs
    frame = events([{"ts": i, "kind": "kernel" if i % 100 else "error", "name": "x", "attrs": {"n": i}}
                    for i in range(1000)])
    parsed = []
    real = attrs.AttrReader.parsed

    def spy(self, row):
        parsed.append(row)
        return real(self, row)
    monkeypatch.setattr(attrs.AttrReader, "parsed", spy)
    assert count("match:\n  sel:\n    kind: error\n    attrs.n|gte: 500\ncondition: sel\n", frame) == 5
    assert len(set(parsed)) == 10          # only the 10 error rows were parsed
