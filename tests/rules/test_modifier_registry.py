"""Modifiers are one class each in one registry: every one is exercised, and a new one
needs only its class and its entry."""
import numpy as np
import pyarrow.compute as pc
import pytest

from rules.engine import modifiers
from rules.engine.errors import CompileError
from rules.engine.modifiers import MODIFIERS, FieldTest, Modifier, KeyValues, compile_field_test, parse_key
from tests.rules import test_modifiers
from tests.rules.helpers import S, count, events


def test_every_registered_modifier_is_exercised_by_test_modifiers():
    used = set()
    for match, _ in test_modifiers.test_modifier.pytestmark[0].args[1]:
        mods = [m for m in match.split(":")[0].split("|")[1:] if m in MODIFIERS]
        used.add(mods[0] if mods else "eq")
    assert used == set(MODIFIERS)


class NotEqual(Modifier):
    """A modifier the language does not have: proves the registry is the only place to add one."""
    name = "ne"

    def validate(self, spec: KeyValues) -> FieldTest:
        if len(spec.values) != 1:
            raise spec.error(f"{spec.key!r} compares with one value")
        return FieldTest(spec.key, spec.field, self, spec.values)

    def mask_strings(self, test, arr):
        return pc.fill_null(pc.not_equal(arr, str(test.values[0])), False).to_numpy(zero_copy_only=False)

    def mask_numbers(self, test, arr):
        return arr != float(test.values[0])


def test_a_new_modifier_is_one_class_and_one_registry_entry(monkeypatch):
    monkeypatch.setitem(modifiers.MODIFIERS, "ne", NotEqual())
    frame = events([{"ts": i * S, "kind": k, "name": "x", "pid": i} for i, k in enumerate(["kernel", "error", "kernel"])])
    assert count("match:\n  sel:\n    kind|ne: kernel\ncondition: sel\n", frame) == 1     # categorical column
    assert count("match:\n  sel:\n    pid|ne: 1\ncondition: sel\n", frame) == 2          # numeric column
    with pytest.raises(CompileError, match="compares with one value"):
        compile_field_test(parse_key("kind|ne", ()), ["a", "b"], modifiers.TEXT, ())


@pytest.mark.parametrize("key, value, kind, message", [
    ("name|gt", 3, modifiers.TEXT, "name is text"),
    ("dur|contains", "x", modifiers.NUMBER, "dur is a number"),
    ("dur|exists", "yes", modifiers.NUMBER, "takes true or false"),
    ("dur|gte|i", 3, modifiers.NUMBER, "|i (case-insensitive) applies to text comparisons, not |gte"),
    ("name|contains|all", "x", modifiers.TEXT, "|all needs a list"),
    ("name|re|i", "(a)\\1", modifiers.TEXT, "does not compile in RE2"),
])
def test_each_modifier_validates_its_values_when_the_rule_is_compiled(key, value, kind, message):
    with pytest.raises(CompileError, match=message.replace("|", r"\|").replace("(", r"\(").replace(")", r"\)")) as e:
        compile_field_test(parse_key(key, ("match", "a", key)), value, kind, ("match", "a", key))
    assert e.value.path == ("match", "a", key)


def test_masks_agree_across_views():
    """One test gives the same verdict whether it sees strings, categories or attrs values."""
    test = compile_field_test(parse_key("x|startswith|i", ()), "ab", modifiers.ANY, ())
    values = ["abc", "ABx", "xab", None, 12]
    import pyarrow as pa
    strings = test.mask_strings(pa.array([None if v is None else str(v) for v in values]))
    assert strings.tolist() == test.mask_values(values).tolist() == [True, True, False, False, False]
    assert test.mask_categories(["abc", "zz"]).tolist() == [True, False]
    numbers = compile_field_test(parse_key("x|lte", ()), "1ms", modifiers.ANY, ())
    assert numbers.mask_values([999_999, "1000000", "2ms", None]).tolist() == [True, True, False, False]
    assert numbers.mask_numbers(np.array([1e6, np.nan])).tolist() == [True, False]
