"""Rule -> CompiledRule: selections become field tests (rules.engine.modifiers), condition and
having become dataclass nodes (rules.engine.expressions), templates become parsed trees.

Compilation is pure: `compile_rule` gives a new CompiledRule each call. A caller that
evaluates the same rules over many traces keeps them in a `CompiledPack` (or its own cache);
the loader compiles once to validate. Nothing here evaluates rule text as code: every
operation is chosen from a fixed table.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from ingest.engine.events import CATEGORY_COLUMNS, COLUMNS
from rules.engine import limits
from rules.engine.errors import CompileError
from rules.engine.expressions import (AGG_ROWS, Condition, ExprError, Having, condition_names, having_aggregates,
                               metric_name, parse_condition, parse_having, parse_metric_name)
from rules.engine.features import get_feature, list_features
from rules.engine.modifiers import ANY, NUMBER, NUMERIC_COLUMNS, TEXT, FieldTest, compile_field_test, parse_key
from rules.engine.quantities import parse_duration
from rules.engine.rule import Rule
from rules.engine.template import ROW_ROOTS, SCALAR_ROOTS, Template, TemplateError, parse_template

T = TypeVar("T")
TEXT_COLUMNS = tuple(c for c in COLUMNS if c not in NUMERIC_COLUMNS)
SEQUENCE_METRICS = ("count", "elapsed_ms", "within_ms")

__all__ = ["CompileError", "CompiledRule", "CompiledPack", "FieldTest", "Selection", "compile_rule",
           "compile_pack", "NUMERIC_COLUMNS", "TEXT_COLUMNS"]


def cost_of(test: FieldTest) -> int:
    """Cheap tests run first; attrs tests only see the rows that survive them."""
    if test.attr_path:
        return 3
    return 0 if test.field in CATEGORY_COLUMNS else 1 if test.field in NUMERIC_COLUMNS else 2


def _field_kind(fld: str, source: str | None) -> str:
    """What the compiler knows of a field's type (feature columns are known only at evaluation)."""
    if source is not None or fld.startswith("attrs."):
        return ANY
    return NUMBER if fld in NUMERIC_COLUMNS else TEXT


def _compile_test(key: str, value, source: str | None, path: tuple) -> FieldTest:
    parsed = parse_key(key, path)
    _check_field(parsed.field, source, path)
    return compile_field_test(parsed, value, _field_kind(parsed.field, source), path)


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
        tests = [_compile_test(k, v, source, mpath + (k,)) for k, v in m.items() if k != "from"]
        alternatives.append(tuple(sorted(tests, key=cost_of)))
    return Selection(name, source, tuple(alternatives))


# ---------------------------------------------------------------- the rule

@dataclass(frozen=True)
class AggregateSpec:
    by: tuple[str, ...] = ()
    window_ns: int | None = None
    sliding: bool = False
    having: Having | None = None


@dataclass(frozen=True)
class SequenceSpec:
    steps: tuple[str, ...]
    within_ns: int
    by: tuple[str, ...] = ()
    absent: str | None = None


@dataclass
class CompiledRule:
    rule: Rule
    selections: dict[str, Selection]
    condition: Condition | None
    source: str | None
    aggregate: AggregateSpec | None
    sequence: SequenceSpec | None
    explain: Template
    recommend: list[Template]
    metrics: tuple[tuple[str, str | None], ...]      # aggregates to compute for every finding
    fingerprint: tuple[str, ...] = field(default_factory=tuple)

    @property
    def id(self) -> str:
        return self.rule.id


def compile_rule(rule: Rule) -> CompiledRule:
    """Compile a loaded Rule (rules.engine.rule.Rule). Raises CompileError with a document path: the
    first problem, with every other one of the rule in its `more` (each part is checked even
    when an earlier one failed: a selection, the condition or sequence, the aggregate, each
    template)."""
    problems: list[CompileError] = []

    def checked(part: Callable[[], T]) -> T | None:
        try:
            return part()
        except CompileError as e:
            problems.append(e)
            return None

    match = rule.match
    if len(match) > limits.MAX_SELECTIONS:
        raise CompileError(f"{len(match)} selections (limit {limits.MAX_SELECTIONS})", ("match",))
    compiled = {name: checked(partial(compile_selection, name, spec, ("match", name)))
                for name, spec in match.items()}
    selections = {name: sel for name, sel in compiled.items() if sel is not None}
    names = list(match)  # a selection that failed is still defined: the condition may name it

    condition = source = aggregate = sequence = None
    if rule.sequence is not None:
        if rule.condition is not None:
            problems.append(CompileError("a sequence rule takes its selections from sequence.steps: remove "
                                         "`condition`", ("condition",)))
        sequence = checked(partial(_compile_sequence, rule.sequence, names))
    else:
        condition = checked(partial(_condition, str(rule.condition), names))
        used = condition_names(condition) if condition is not None else set(names)
        sources = {selections[n].source for n in used if n in selections}
        if len(sources) > 1:
            problems.append(CompileError(
                "condition combines selections that read different tables ("
                + ", ".join(f"{n}: {selections[n].source or 'events'}" for n in sorted(used) if n in selections)
                + "); a condition tests rows of one table", ("condition",)))
        source = next(iter(sources)) if len(sources) == 1 else None
        unused = [n for n in names if n not in used]
        if unused:
            problems.append(CompileError(f"selection {unused[0]!r} is defined but never used in condition",
                                         ("match", unused[0])))
        if rule.aggregate is not None:
            aggregate = checked(partial(_compile_aggregate, rule.aggregate, source))

    by = aggregate.by if aggregate else sequence.by if sequence else ()
    row_roots = set(ROW_ROOTS) | (set(sequence.steps) | ({sequence.absent} if sequence.absent else set())
                                  if sequence else set())
    if rule.sequence is not None and sequence is None:  # its steps are unknown: any selection may be one
        row_roots |= set(names)
    roots = set(SCALAR_ROOTS) | set(by)
    explain = checked(partial(_template, rule.explain, roots, row_roots, ("explain",)))
    recommend = [checked(partial(_template, t, roots, row_roots, ("recommend", i))) for i, t in enumerate(rule.recommend)]

    metrics: set[tuple[str, str | None]] = {("count", None)}
    if aggregate and aggregate.having:
        metrics |= {a for a in having_aggregates(aggregate.having) if a[0] not in AGG_ROWS}
    for i, tpl in enumerate([explain] + recommend):
        for ph in tpl.placeholders() if tpl is not None else ():
            if ph.path[0] == "metrics":
                name = ".".join(ph.path[1:])
                parsed = parse_metric_name(name)
                if parsed is None and name not in by and not (sequence and name in SEQUENCE_METRICS):
                    where = ("explain",) if i == 0 else ("recommend", i - 1)
                    problems.append(CompileError(f"{{metrics.{name}}}: not an aggregate (write count, rate, "
                                                 "p99_dur, max_value, distinct_name ...) or a group key", where))
                if parsed:
                    metrics.add(parsed)
            elif ph.path[0] == "rate":
                metrics.add(("rate", None))
    if problems:
        first = problems[0]
        first.more = tuple(problems[1:])
        raise first
    assert explain is not None and all(r is not None for r in recommend)  # no problem: every part compiled
    return CompiledRule(rule=rule, selections=selections, condition=condition, source=source,
                        aggregate=aggregate, sequence=sequence, explain=explain,
                        recommend=[r for r in recommend if r is not None],
                        metrics=tuple(sorted(metrics, key=lambda m: metric_name(*m))),
                        fingerprint=tuple(rule.fingerprint))


def _condition(text: str, names: list[str]) -> Condition:
    try:
        return parse_condition(text, names)
    except ExprError as e:
        raise CompileError(e.message, ("condition",), e.offset) from None


@dataclass(frozen=True)
class CompiledPack:
    """Rules compiled once, with the rules that failed to compile and why."""
    rules: tuple[CompiledRule, ...]
    errors: tuple[tuple[str, str], ...] = ()       # (rule id, message)

    def __iter__(self):
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)


def compile_pack(rules) -> CompiledPack:
    """Every rule compiled; one that does not compile is left out and named in `errors`.
    A pack compiled already (the CLI compiles the builtin one while the files parse) is
    returned as it is."""
    if isinstance(rules, CompiledPack):
        return rules
    compiled, errors = [], []
    for rule in rules or []:
        try:
            compiled.append(compile_rule(rule))
        except Exception as e:  # one bad rule never stops the others
            errors.append((getattr(rule, "id", "?"), str(e)))
    return CompiledPack(tuple(compiled), tuple(errors))


def _duration(text, path: tuple) -> int:
    try:
        ns = parse_duration(text)
    except ValueError as e:
        raise CompileError(str(e), path) from None
    if ns < limits.MIN_WINDOW_NS:
        raise CompileError(f"{text!r} is shorter than the smallest window, 1ms", path)
    return ns


def _compile_aggregate(spec: dict, source: str | None) -> AggregateSpec:
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
    return AggregateSpec(by=by, window_ns=window, sliding=sliding, having=having)


def _compile_sequence(spec: dict, names: list[str]) -> SequenceSpec:
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
    return SequenceSpec(steps=steps, within_ns=_duration(spec["within"], ("sequence", "within")),
                    by=by, absent=spec.get("absent"))


def _template(text, roots: set[str], row_roots: set[str], path: tuple) -> Template:
    try:
        return parse_template(str(text), roots, row_roots)
    except TemplateError as e:
        raise CompileError(e.message, path, e.offset) from None
