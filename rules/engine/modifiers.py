"""Field modifiers (`name|re`, `dur|gte`, `attrs.pg|exists` ...): one class each, in one registry.

A modifier does two jobs: `validate` checks a key's values when the rule is compiled (errors
carry the rule document path, so the loader points at line and column) and returns the
`FieldTest`; the `mask_*` methods test that field over one view of a column, vectorised:

  * `mask_strings`: a pyarrow string array (nulls never match),
  * `mask_numbers`: a float64 numpy array (NaN is "not set"),
  * `mask_categories`: the distinct values of a categorical column (the evaluator gathers
    the verdicts through the codes, so no row is ever converted to a Python string),
  * `mask_number_column`: a numeric column, `mask_values`: Python values read from attrs JSON.

Adding a modifier: a subclass here, its entry in MODIFIERS, and a test in
tests/rules/test_modifiers.py. The flags `|i` and `|all` are not modifiers: they
change how a modifier compares (case, every value instead of any).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import re2

from rules.engine import limits
from rules.engine.aggregate import numeric
from rules.engine.errors import CompileError
from rules.engine.quantities import parse_quantity

NUMERIC_COLUMNS = ("ts", "dur", "pid", "tid", "device", "stream", "corr", "value")
FLAGS = ("i", "all")

# what the compiler knows about a field's type: an event column of numbers or of text, or
# anything (attrs.<path>, a feature's columns), which is known only at evaluation
NUMBER, TEXT, ANY = "number", "text", "any"


@dataclass(frozen=True)
class FieldTest:
    key: str                      # as written: name|re|i
    field: str                    # column, extra feature column, or attrs.<path>
    modifier: "Modifier"
    values: tuple
    ci: bool = False
    all: bool = False
    regexes: tuple = ()           # google-re2 objects for |re (per-category and attrs tests)

    @property
    def op(self) -> str:
        return self.modifier.name

    @property
    def attr_path(self) -> tuple[str, ...] | None:
        return tuple(self.field.split(".")[1:]) if self.field.startswith("attrs.") else None

    def mask_strings(self, arr: pa.Array) -> np.ndarray:
        return self.modifier.mask_strings(self, arr)

    def mask_numbers(self, arr: np.ndarray) -> np.ndarray:
        return self.modifier.mask_numbers(self, arr)

    def mask_categories(self, categories) -> np.ndarray:
        return self.modifier.mask_categories(self, categories)

    def mask_number_column(self, arr: np.ndarray) -> np.ndarray:
        return self.modifier.mask_number_column(self, arr)

    def mask_values(self, values: list) -> np.ndarray:
        return self.modifier.mask_values(self, values)


@dataclass(frozen=True)
class KeyValues:
    """One `field|modifier|flags: value` key of a selection, split, before validation."""
    key: str
    field: str
    kind: str                     # NUMBER, TEXT or ANY
    values: tuple
    flags: frozenset
    path: tuple

    def error(self, message: str) -> CompileError:
        return CompileError(message, self.path)


class Modifier:
    """One comparison. Subclasses set `name` and implement validate and the masks."""
    name: ClassVar[str]
    takes_case_flag: ClassVar[bool] = False     # accepts |i

    def resolve(self, values: tuple) -> tuple["Modifier", tuple]:
        """The modifier that really applies (`name: null` means `name|exists: false`)."""
        return self, values

    def validate(self, spec: KeyValues) -> FieldTest:
        raise NotImplementedError

    def mask_strings(self, test: FieldTest, arr: pa.Array) -> np.ndarray:
        raise NotImplementedError

    def mask_numbers(self, test: FieldTest, arr: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def mask_categories(self, test: FieldTest, categories) -> np.ndarray:
        return self.mask_strings(test, pa.array(np.asarray(categories, dtype=object), type=pa.string()))

    def mask_number_column(self, test: FieldTest, arr: np.ndarray) -> np.ndarray:
        return self.mask_numbers(test, arr.astype(np.float64, copy=False))

    def mask_values(self, test: FieldTest, values: list) -> np.ndarray:
        """attrs values: numbers and numeric text compare as numbers, the rest as text."""
        return self.mask_numbers(test, numbers_of(values)) | self.mask_strings(test, texts_of(values))

    def __repr__(self) -> str:
        return f"|{self.name}"


class Exists(Modifier):
    """`field|exists: true`: the field is set (not null, not empty, not NaN)."""
    name = "exists"

    def validate(self, spec: KeyValues) -> FieldTest:
        if len(spec.values) != 1 or not isinstance(spec.values[0], bool):
            raise spec.error(f"{spec.key!r} takes true or false")
        return FieldTest(spec.key, spec.field, self, spec.values)

    def mask_strings(self, test, arr):
        present = _np(pc.and_(pc.is_valid(arr), pc.not_equal(arr, "")))
        return present if test.values[0] else ~present

    def mask_numbers(self, test, arr):
        present = ~np.isnan(arr)
        return present if test.values[0] else ~present

    def mask_values(self, test, values):
        present = np.fromiter((v is not None and v != "" for v in values), bool, len(values))
        return present if test.values[0] else ~present


class Equals(Modifier):
    """`field: value` or `field: [a, b]`: equal to one of the values (all of them with |all)."""
    name = "eq"
    takes_case_flag = True

    def resolve(self, values):
        if values == (None,):
            return MODIFIERS["exists"], (False,)
        return self, values

    def validate(self, spec: KeyValues) -> FieldTest:
        if spec.kind == NUMBER:
            numbers = tuple(as_number(v) for v in spec.values)
            bad = [v for v, n in zip(spec.values, numbers) if np.isnan(n)]
            if bad:
                raise spec.error(f"{spec.field} is a number: {bad[0]!r} is not a number, a duration or a size")
            return FieldTest(spec.key, spec.field, self, numbers, all="all" in spec.flags)
        values = tuple(as_text(v) for v in spec.values) if spec.kind == TEXT else spec.values
        return FieldTest(spec.key, spec.field, self, values, "i" in spec.flags, "all" in spec.flags)

    def mask_strings(self, test, arr):
        target = pc.utf8_lower(arr) if test.ci else arr
        wanted = [as_text(v).lower() if test.ci else as_text(v) for v in test.values]
        if test.all:
            return _all(_np(pc.equal(target, w)) for w in wanted)
        return _np(pc.is_in(target, value_set=pa.array(wanted, type=pa.string())))

    def mask_numbers(self, test, arr):
        wanted = [n for n in (as_number(v) for v in test.values) if not np.isnan(n)]
        if test.all:
            return _all(arr == w for w in wanted) if wanted else np.zeros(len(arr), bool)
        return np.isin(arr, wanted)


class In(Equals):
    """`field|in: [a, b]`: the explicit spelling of a list of equal values."""
    name = "in"

    def resolve(self, values):
        return self, values


class _TextModifier(Modifier):
    """Substring and pattern tests: text only, one pyarrow kernel per value."""
    takes_case_flag = True
    kernel: ClassVar[Callable[..., Any] | None] = None  # each subclass names its pyarrow kernel

    def validate(self, spec: KeyValues) -> FieldTest:
        if spec.kind == NUMBER:
            raise spec.error(f"{spec.field} is a number: |{self.name} compares text; use gt/gte/lt/lte or eq")
        texts = tuple(as_text(v) for v in spec.values)
        return FieldTest(spec.key, spec.field, self, texts, "i" in spec.flags, "all" in spec.flags,
                         self.regexes(texts, "i" in spec.flags, spec.path))

    def regexes(self, texts: tuple, ignore_case: bool, path: tuple) -> tuple:
        return ()

    def mask_strings(self, test, arr):
        kernel = type(self).kernel
        assert kernel is not None
        masks = (_np(kernel(arr, pattern=v, ignore_case=test.ci)) for v in test.values)
        return _all(masks) if test.all else _any(masks)

    def mask_number_column(self, test, arr):
        return self.mask_strings(test, pa.array([json_text(v) for v in arr.tolist()], type=pa.string()))

    def mask_values(self, test, values):
        return self.mask_strings(test, texts_of(values))


class Contains(_TextModifier):
    """`field|contains: text`: the text occurs in the field (|i ignores case)."""
    name = "contains"
    kernel = staticmethod(pc.match_substring)


class StartsWith(_TextModifier):
    """`field|startswith: text`: the field begins with the text (|i ignores case)."""
    name = "startswith"
    kernel = staticmethod(pc.starts_with)


class EndsWith(_TextModifier):
    """`field|endswith: text`: the field ends with the text (|i ignores case)."""
    name = "endswith"
    kernel = staticmethod(pc.ends_with)


class Regex(_TextModifier):
    """`field|re: pattern`: an RE2 search (linear time; refused at load when too big)."""
    name = "re"
    kernel = staticmethod(pc.match_substring_regex)

    def regexes(self, texts, ignore_case, path):
        return tuple(compile_regex(t, ignore_case, path) for t in texts)

    def mask_categories(self, test, categories):
        # one RE2 search per distinct value (the categories are few, the rows many)
        cats = [str(c) for c in categories]
        masks = (np.fromiter((rx.search(c) is not None for c in cats), bool, len(cats)) for rx in test.regexes)
        return _all(masks) if test.all else _any(masks)


class _NumberModifier(Modifier):
    """Ordered comparisons with one number, duration (ns) or size (bytes)."""
    compare: ClassVar[Callable[..., Any] | None] = None  # each subclass names its numpy comparison

    def validate(self, spec: KeyValues) -> FieldTest:
        if len(spec.values) != 1:
            raise spec.error(f"{spec.key!r} compares with one value, not a list")
        if spec.kind == TEXT:
            raise spec.error(f"{spec.field} is text: |{self.name} compares numbers (numeric fields: "
                             f"{', '.join(NUMERIC_COLUMNS)}, attrs.<path>, feature columns)")
        number = as_number(spec.values[0])
        if np.isnan(number):
            raise spec.error(f"{spec.key!r}: {spec.values[0]!r} is not a number, a duration (10ms) or a size (2GiB)")
        return FieldTest(spec.key, spec.field, self, (number,))

    def mask_numbers(self, test, arr):
        compare = type(self).compare
        assert compare is not None
        with np.errstate(invalid="ignore"):
            return compare(arr, test.values[0])

    def mask_strings(self, test, arr):
        return self.mask_numbers(test, _np_float(arr))

    def mask_values(self, test, values):
        return self.mask_numbers(test, numbers_of(values))


class Greater(_NumberModifier):
    """`field|gt: 5ms`: greater than a number, duration or size."""
    name = "gt"
    compare = staticmethod(np.greater)


class GreaterOrEqual(_NumberModifier):
    """`field|gte: 5ms`: greater than or equal to a number, duration or size."""
    name = "gte"
    compare = staticmethod(np.greater_equal)


class Less(_NumberModifier):
    """`field|lt: 5ms`: less than a number, duration or size."""
    name = "lt"
    compare = staticmethod(np.less)


class LessOrEqual(_NumberModifier):
    """`field|lte: 5ms`: less than or equal to a number, duration or size."""
    name = "lte"
    compare = staticmethod(np.less_equal)


MODIFIERS: dict[str, Modifier] = {m.name: m for m in (
    Equals(), In(), Exists(), Contains(), StartsWith(), EndsWith(), Regex(),
    Greater(), GreaterOrEqual(), Less(), LessOrEqual())}
"""Every modifier a rule may write, by name (the order is the one error messages list)."""


@dataclass(frozen=True)
class Key:
    """A selection key split: `name|re|i` -> field name, modifier, flags."""
    text: str
    field: str
    modifier: Modifier
    flags: frozenset


def parse_key(key: str, path: tuple) -> Key:
    """Split a key, refusing unknown modifiers and two comparisons in one key."""
    fld, *mods = key.split("|")
    ops = [m for m in mods if m in MODIFIERS]
    unknown = [m for m in mods if m not in MODIFIERS and m not in FLAGS]
    if unknown:
        raise CompileError(f"unknown modifier |{unknown[0]} in {key!r} (modifiers: "
                           f"{', '.join(MODIFIERS)}; flags: |i case-insensitive, |all every value must match)", path)
    if len(ops) > 1:
        raise CompileError(f"{key!r} combines |{ops[0]} and |{ops[1]}: use one comparison per key "
                           "(write two keys, or two selections)", path)
    return Key(key, fld, MODIFIERS[ops[0] if ops else "eq"], frozenset(m for m in mods if m in FLAGS))


def compile_field_test(key: Key, value, kind: str, path: tuple) -> FieldTest:
    """The test of one key and its value(s), or CompileError at `path`. `kind` is what the
    compiler knows of the field's type: NUMBER, TEXT or ANY."""
    values = tuple(value) if isinstance(value, list) else (value,)
    if len(values) > limits.MAX_VALUES_PER_FIELD:
        raise CompileError(f"{key.text!r} lists {len(values)} values (limit {limits.MAX_VALUES_PER_FIELD})", path)
    modifier, values = key.modifier.resolve(values)
    if any(v is None for v in values):
        raise CompileError(f"{key.text!r}: null is only allowed alone (it means the field is empty); "
                           "use `|exists: false`", path)
    if "i" in key.flags and not modifier.takes_case_flag:
        raise CompileError(f"|i (case-insensitive) applies to text comparisons, not |{modifier.name}", path)
    if "all" in key.flags and len(values) < 2:
        raise CompileError(f"|all needs a list of values in {key.text!r}", path)
    return modifier.validate(KeyValues(key.text, key.field, kind, values, key.flags, path))


def compile_regex(pattern: str, ignore_case: bool, path: tuple):
    if len(pattern) > limits.MAX_REGEX_LENGTH:
        raise CompileError(f"regular expression is {len(pattern)} characters long (limit {limits.MAX_REGEX_LENGTH})", path)
    options = re2.Options()
    options.max_mem = limits.RE2_MAX_MEM
    options.log_errors = False
    options.case_sensitive = not ignore_case
    try:
        rx = re2.compile(pattern, options)
    except re2.error as e:
        msg = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
        raise CompileError(f"regular expression {pattern!r} does not compile in RE2: {msg} "
                           "(RE2 has no backreferences or lookaround)", path) from None
    if rx.programsize > limits.MAX_RE2_PROGRAM_SIZE:
        raise CompileError(f"regular expression {pattern[:60]!r} compiles to {rx.programsize} RE2 instructions "
                           f"(limit {limits.MAX_RE2_PROGRAM_SIZE}); simplify the counted repetitions", path)
    return rx


# ---------------------------------------------------------------- values

def as_number(v) -> float:
    """A rule or attrs value as a number: numbers, booleans, numeric text, durations (ns)
    and sizes (bytes); NaN when it is none of them."""
    if isinstance(v, (bool, int, float)):
        return float(v)
    q = parse_quantity(v) if isinstance(v, str) else None
    return float("nan") if q is None else q


def as_text(v) -> str:
    """A rule value as the text it matches: true/false, whole floats without `.0`."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def json_text(v) -> str:
    """An attrs value as text: booleans as in JSON, objects and lists as their JSON."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return orjson.dumps(v).decode()
    return str(v)


def texts_of(values: list) -> pa.Array:
    return pa.array([None if v is None else json_text(v) for v in values], type=pa.string())


def numbers_of(values: list) -> np.ndarray:
    """attrs values as float64 (text that is a number counts; anything else is NaN)."""
    if not values:
        return np.zeros(0)
    boxed = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):     # one by one: a list value stays one object, not a 2-D array
        boxed[i] = v
    return numeric(boxed)


def _np(arr) -> np.ndarray:
    return arr.fill_null(False).to_numpy(zero_copy_only=False)


def _np_float(arr: pa.Array) -> np.ndarray:
    return np.asarray([as_number(v) if v is not None else np.nan for v in arr.to_pylist()], dtype=float) \
        if len(arr) else np.zeros(0)


def _any(masks) -> np.ndarray:
    return functools.reduce(np.logical_or, masks)


def _all(masks) -> np.ndarray:
    return functools.reduce(np.logical_and, masks)
