"""Rule -> CompiledRule: selections become field tests that build boolean masks with
vectorized numpy/pyarrow operations; condition, having and templates become parsed trees.

Compilation happens once per rule (the loader runs it to validate, and caches it).
Nothing here evaluates rule text as code: every operation is chosen from a fixed table.

Field tests see a column through one of two views:
  * strings: a pyarrow string array (categorical columns are tested once per category,
    not per row: the mask is then gathered through the category codes),
  * numbers: a float64 numpy array (durations like 10ms and sizes like 2GiB are converted).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import re2

from ingest.events import CATEGORY_COLUMNS, COLUMNS
from rules import limits
from rules.expressions import (AGG_ROWS, ExprError, condition_names, having_aggregates, metric_name,
                               parse_condition, parse_having, parse_metric_name)
from rules.features import get_feature, list_features
from rules.quantities import parse_duration, parse_quantity
from rules.template import ROW_ROOTS, SCALAR_ROOTS, Template, TemplateError, parse_template

NUMERIC_COLUMNS = ("ts", "dur", "pid", "tid", "device", "stream", "corr", "value")
TEXT_COLUMNS = tuple(c for c in COLUMNS if c not in NUMERIC_COLUMNS)
TEXT_OPS = ("contains", "startswith", "endswith", "re")
NUMBER_OPS = ("gt", "gte", "lt", "lte")
OPS = ("eq", "in", "exists") + TEXT_OPS + NUMBER_OPS
FLAGS = ("i", "all")
SEQUENCE_METRICS = ("count", "elapsed_ms", "within_ms")


class CompileError(ValueError):
    """A semantic error in a rule; `path` points into the rule document (for line/col),
    `offset` into the string value at that path."""

    def __init__(self, message: str, path: tuple = (), offset: int = 0):
        super().__init__(message)
        self.message, self.path, self.offset = message, tuple(path), offset


# ---------------------------------------------------------------- field tests

@dataclass(frozen=True)
class FieldTest:
    key: str                      # as written: name|re|i
    field: str                    # column, extra feature column, or attrs.<path>
    op: str
    values: tuple
    ci: bool = False
    all: bool = False
    regexes: tuple = ()           # google-re2 objects for |re (per-category and attrs tests)

    @property
    def attr_path(self) -> tuple[str, ...] | None:
        return tuple(self.field.split(".")[1:]) if self.field.startswith("attrs.") else None

    @property
    def cost(self) -> int:
        """Cheap tests run first; attrs tests only see the rows that survive them."""
        if self.attr_path:
            return 3
        return 0 if self.field in CATEGORY_COLUMNS else 1 if self.field in NUMERIC_COLUMNS else 2

    def on_strings(self, arr: pa.Array) -> np.ndarray:
        """Mask over a pyarrow string array (nulls never match)."""
        if self.op == "exists":
            present = pc.and_(pc.is_valid(arr), pc.not_equal(arr, ""))
            return _np(present) if self.values[0] else ~_np(present)
        if self.op in ("eq", "in"):
            target = pc.utf8_lower(arr) if self.ci else arr
            wanted = [_as_text(v).lower() if self.ci else _as_text(v) for v in self.values]
            if self.all:
                return _all(_np(pc.equal(target, w)) for w in wanted)
            return _np(pc.is_in(target, value_set=pa.array(wanted, type=pa.string())))
        if self.op in NUMBER_OPS:
            return self.on_numbers(_np_float(arr))
        kernel = {"contains": pc.match_substring, "startswith": pc.starts_with,
                  "endswith": pc.ends_with, "re": pc.match_substring_regex}[self.op]
        masks = (_np(kernel(arr, pattern=v, ignore_case=self.ci)) for v in self.values)
        return _all(masks) if self.all else _any(masks)

    def on_numbers(self, arr: np.ndarray) -> np.ndarray:
        if self.op == "exists":
            present = ~np.isnan(arr)
            return present if self.values[0] else ~present
        if self.op in ("eq", "in"):
            wanted = [n for n in (_as_number(v) for v in self.values) if not np.isnan(n)]
            if self.all:
                return _all(arr == w for w in wanted) if wanted else np.zeros(len(arr), bool)
            return np.isin(arr, wanted)
        v = self.values[0]
        with np.errstate(invalid="ignore"):
            return {"gt": arr > v, "gte": arr >= v, "lt": arr < v, "lte": arr <= v}[self.op]

    def on_categories(self, categories) -> np.ndarray:
        """Mask over the distinct values of a categorical column (one regex run each)."""
        if self.op == "re":
            cats = [str(c) for c in categories]
            masks = (np.fromiter((rx.search(c) is not None for c in cats), bool, len(cats)) for rx in self.regexes)
            return _all(masks) if self.all else _any(masks)
        return self.on_strings(pa.array(np.asarray(categories, dtype=object), type=pa.string()))


def _np(arr) -> np.ndarray:
    return arr.fill_null(False).to_numpy(zero_copy_only=False)


def _np_float(arr: pa.Array) -> np.ndarray:
    return np.asarray([_as_number(v) if v is not None else np.nan for v in arr.to_pylist()], dtype=float) \
        if len(arr) else np.zeros(0)


def _any(masks) -> np.ndarray:
    return functools.reduce(np.logical_or, masks)


def _all(masks) -> np.ndarray:
    return functools.reduce(np.logical_and, masks)


def _as_number(v):
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    q = parse_quantity(v) if isinstance(v, str) else None
    return float("nan") if q is None else q


def _as_text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def compile_field_test(key: str, value, source: str | None, path: tuple) -> FieldTest:
    parts = key.split("|")
    fld, mods = parts[0], parts[1:]
    ops = [m for m in mods if m in OPS]
    flags = [m for m in mods if m in FLAGS]
    unknown = [m for m in mods if m not in OPS and m not in FLAGS]
    if unknown:
        raise CompileError(f"unknown modifier |{unknown[0]} in {key!r} (modifiers: "
                           f"{', '.join(OPS)}; flags: |i case-insensitive, |all every value must match)", path)
    if len(ops) > 1:
        raise CompileError(f"{key!r} combines |{ops[0]} and |{ops[1]}: use one comparison per key "
                           "(write two keys, or two selections)", path)
    op = ops[0] if ops else "eq"
    _check_field(fld, source, path)
    values = tuple(value) if isinstance(value, list) else (value,)
    if len(values) > limits.MAX_VALUES_PER_FIELD:
        raise CompileError(f"{key!r} lists {len(values)} values (limit {limits.MAX_VALUES_PER_FIELD})", path)
    numeric_column = source is None and fld in NUMERIC_COLUMNS
    text_column = source is None and fld in TEXT_COLUMNS
    if op == "eq" and values == (None,):
        op, values = "exists", (False,)
    if any(v is None for v in values):
        raise CompileError(f"{key!r}: null is only allowed alone (it means the field is empty); "
                           "use `|exists: false`", path)
    if "i" in flags and op not in ("eq", "in") + TEXT_OPS:
        raise CompileError(f"|i (case-insensitive) applies to text comparisons, not |{op}", path)
    if "all" in flags and len(values) < 2:
        raise CompileError(f"|all needs a list of values in {key!r}", path)
    if op == "exists":
        if len(values) != 1 or not isinstance(values[0], bool):
            raise CompileError(f"{key!r} takes true or false", path)
        return FieldTest(key, fld, op, values)
    if op in NUMBER_OPS:
        if len(values) != 1:
            raise CompileError(f"{key!r} compares with one value, not a list", path)
        if text_column:
            raise CompileError(f"{fld} is text: |{op} compares numbers (numeric fields: {', '.join(NUMERIC_COLUMNS)}, "
                               "attrs.<path>, feature columns)", path)
        number = _as_number(values[0])
        if np.isnan(number):
            raise CompileError(f"{key!r}: {values[0]!r} is not a number, a duration (10ms) or a size (2GiB)", path)
        return FieldTest(key, fld, op, (number,))
    if op in TEXT_OPS:
        if numeric_column:
            raise CompileError(f"{fld} is a number: |{op} compares text; use gt/gte/lt/lte or eq", path)
        texts = tuple(_as_text(v) for v in values)
        regexes = tuple(compile_regex(t, "i" in flags, path) for t in texts) if op == "re" else ()
        return FieldTest(key, fld, op, texts, "i" in flags, "all" in flags, regexes)
    # eq / in
    if numeric_column:
        numbers = tuple(_as_number(v) for v in values)
        bad = [v for v, n in zip(values, numbers) if np.isnan(n)]
        if bad:
            raise CompileError(f"{fld} is a number: {bad[0]!r} is not a number, a duration or a size", path)
        return FieldTest(key, fld, op, numbers, all="all" in flags)
    return FieldTest(key, fld, op, tuple(_as_text(v) for v in values) if text_column else values,
                     "i" in flags, "all" in flags)


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


def _check_field(fld: str, source: str | None, path: tuple) -> None:
    if fld.startswith("attrs.") or fld == "attrs":
        if fld == "attrs" or any(not p or p.startswith("_") for p in fld.split(".")[1:]):
            if fld != "attrs":
                raise CompileError(f"{fld!r} is not a valid attrs path (write attrs.key.subkey)", path)
        return
    if source is None and fld not in COLUMNS:
        raise CompileError(f"unknown field {fld!r} (event columns: {', '.join(COLUMNS)}; or attrs.<path>; "
                           "feature columns need `from: <feature>`)", path)
    if "." in fld:
        raise CompileError(f"{fld!r}: only attrs.<path> may be dotted", path)


# ---------------------------------------------------------------- selections

@dataclass(frozen=True)
class Selection:
    name: str
    source: str | None                       # None: the events table
    alternatives: tuple[tuple[FieldTest, ...], ...]   # OR of ANDs, each sorted cheap first


def compile_selection(name: str, spec, path: tuple) -> Selection:
    maps = spec if isinstance(spec, list) else [spec]
    sources = {m.get("from") for m in maps}
    if len(sources) > 1:
        raise CompileError(f"selection {name!r}: every alternative must read the same table "
                           f"(found from: {', '.join(sorted(str(s) for s in sources))})", path)
    source = sources.pop()
    if source is not None and get_feature(source) is None:
        known = ", ".join(f["name"] for f in list_features()) or "none"
        raise CompileError(f"selection {name!r} reads from unknown feature {source!r} (features: {known})",
                           path + ((0,) if isinstance(spec, list) else ()) + ("from",))
    alternatives = []
    for i, m in enumerate(maps):
        mpath = path + ((i,) if isinstance(spec, list) else ())
        tests = [compile_field_test(k, v, source, mpath + (k,)) for k, v in m.items() if k != "from"]
        alternatives.append(tuple(sorted(tests, key=lambda t: t.cost)))
    return Selection(name, source, tuple(alternatives))


# ---------------------------------------------------------------- the rule

@dataclass(frozen=True)
class Aggregate:
    by: tuple[str, ...] = ()
    window_ns: int | None = None
    sliding: bool = False
    having: tuple | None = None


@dataclass(frozen=True)
class Sequence:
    steps: tuple[str, ...]
    within_ns: int
    by: tuple[str, ...] = ()
    absent: str | None = None


@dataclass
class CompiledRule:
    rule: object
    selections: dict[str, Selection]
    condition: tuple | None
    source: str | None
    aggregate: Aggregate | None
    sequence: Sequence | None
    explain: Template
    recommend: list[Template]
    metrics: tuple[tuple[str, str | None], ...]      # aggregates to compute for every finding
    fingerprint: tuple[str, ...] = field(default_factory=tuple)

    @property
    def id(self) -> str:
        return self.rule.id


def compile_rule(rule) -> CompiledRule:
    """Compile a loaded Rule (rules.loader.Rule). Raises CompileError with a document path."""
    cached = getattr(rule, "_compiled", None)
    if cached is not None:
        return cached
    data = rule.data
    match = data["match"]
    if len(match) > limits.MAX_SELECTIONS:
        raise CompileError(f"{len(match)} selections (limit {limits.MAX_SELECTIONS})", ("match",))
    selections = {name: compile_selection(name, spec, ("match", name)) for name, spec in match.items()}
    names = list(selections)

    condition = source = aggregate = sequence = None
    if "sequence" in data:
        if "condition" in data:
            raise CompileError("a sequence rule takes its selections from sequence.steps: remove `condition`",
                               ("condition",))
        sequence = _compile_sequence(data["sequence"], names)
    else:
        try:
            condition = parse_condition(str(data["condition"]), names)
        except ExprError as e:
            raise CompileError(e.message, ("condition",), e.offset) from None
        used = condition_names(condition)
        sources = {selections[n].source for n in used}
        if len(sources) > 1:
            raise CompileError("condition combines selections that read different tables ("
                               + ", ".join(f"{n}: {selections[n].source or 'events'}" for n in sorted(used))
                               + "); a condition tests rows of one table", ("condition",))
        source = sources.pop()
        unused = [n for n in names if n not in used]
        if unused:
            raise CompileError(f"selection {unused[0]!r} is defined but never used in condition", ("match", unused[0]))
        if "aggregate" in data:
            aggregate = _compile_aggregate(data["aggregate"], source)

    by = aggregate.by if aggregate else sequence.by if sequence else ()
    row_roots = set(ROW_ROOTS) | (set(sequence.steps) | ({sequence.absent} if sequence.absent else set())
                                  if sequence else set())
    roots = set(SCALAR_ROOTS) | set(by)
    explain = _template(data["explain"], roots, row_roots, ("explain",))
    recommend = [_template(t, roots, row_roots, ("recommend", i)) for i, t in enumerate(data.get("recommend") or [])]

    metrics = {("count", None)}
    if aggregate and aggregate.having:
        metrics |= {a for a in having_aggregates(aggregate.having) if a[0] not in AGG_ROWS}
    for i, tpl in enumerate([explain] + recommend):
        for ph in tpl.placeholders():
            if ph.path[0] == "metrics":
                name = ".".join(ph.path[1:])
                parsed = parse_metric_name(name)
                if parsed is None and name not in by and not (sequence and name in SEQUENCE_METRICS):
                    where = ("explain",) if i == 0 else ("recommend", i - 1)
                    raise CompileError(f"{{metrics.{name}}}: not an aggregate (write count, rate, "
                                       "p99_dur, max_value, distinct_name ...) or a group key", where)
                if parsed:
                    metrics.add(parsed)
            elif ph.path[0] == "rate":
                metrics.add(("rate", None))
    compiled = CompiledRule(rule=rule, selections=selections, condition=condition, source=source,
                            aggregate=aggregate, sequence=sequence, explain=explain, recommend=recommend,
                            metrics=tuple(sorted(metrics, key=lambda m: metric_name(*m))),
                            fingerprint=tuple(data.get("fingerprint") or ()))
    try:
        rule._compiled = compiled
    except AttributeError:
        pass
    return compiled


def _duration(text, path: tuple) -> int:
    try:
        ns = parse_duration(text)
    except ValueError as e:
        raise CompileError(str(e), path) from None
    if ns < limits.MIN_WINDOW_NS:
        raise CompileError(f"{text!r} is shorter than the smallest window, 1ms", path)
    return ns


def _compile_aggregate(spec: dict, source: str | None) -> Aggregate:
    having = None
    if "having" in spec:
        try:
            having = parse_having(str(spec["having"]))
        except ExprError as e:
            raise CompileError(e.message, ("aggregate", "having"), e.offset) from None
    sliding = bool(spec.get("sliding", False))
    if "tumbling" in spec and bool(spec["tumbling"]) == sliding:
        raise CompileError("a window is either tumbling or sliding", ("aggregate", "tumbling"))
    window = _duration(spec["window"], ("aggregate", "window")) if "window" in spec else None
    if sliding and window is None:
        raise CompileError("sliding: true needs a window (e.g. window: 10s)", ("aggregate", "sliding"))
    by = tuple(spec.get("by") or ())
    for i, f in enumerate(by):
        _check_field(f, source, ("aggregate", "by", i))
    return Aggregate(by=by, window_ns=window, sliding=sliding, having=having)


def _compile_sequence(spec: dict, names: list[str]) -> Sequence:
    steps = tuple(spec["steps"])
    if len(steps) > limits.MAX_SEQUENCE_STEPS:
        raise CompileError(f"{len(steps)} steps (limit {limits.MAX_SEQUENCE_STEPS})", ("sequence", "steps"))
    for i, s in enumerate(steps + ((spec["absent"],) if "absent" in spec else ())):
        if s not in names:
            where = ("sequence", "steps", i) if i < len(steps) else ("sequence", "absent")
            raise CompileError(f"sequence names selection {s!r} which is not defined under match "
                               f"(defined: {', '.join(names)})", where)
    if len(steps) < 2 and "absent" not in spec:
        raise CompileError("a sequence needs two steps, or one step and `absent`", ("sequence", "steps"))
    unused = [n for n in names if n not in steps and n != spec.get("absent")]
    if unused:
        raise CompileError(f"selection {unused[0]!r} is defined but not a step of the sequence", ("match", unused[0]))
    by = tuple(spec.get("by") or ())
    for i, f in enumerate(by):
        _check_field(f, "any table", ("sequence", "by", i))
    return Sequence(steps=steps, within_ns=_duration(spec["within"], ("sequence", "within")),
                    by=by, absent=spec.get("absent"))


def _template(text, roots: set[str], row_roots: set[str], path: tuple) -> Template:
    try:
        return parse_template(str(text), roots, row_roots)
    except TemplateError as e:
        raise CompileError(e.message, path, e.offset) from None
