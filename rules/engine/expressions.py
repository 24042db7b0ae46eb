"""The two small expression languages of a rule as dataclass nodes (never eval'ed).

`condition` combines selection names:   errors and not (benign or 1 of filter_*)
`aggregate.having` tests group metrics: count >= 3 and p99(dur) > 20ms or rate > 100

`rules.engine.grammar` parses the text; this module turns the parse tree into the nodes below and
makes the checks that need the rule (selection names, aggregate names). Errors carry the
character offset so the loader can point at line and column.
"""
from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Generic, Literal, TypeVar, Union

import lark

from rules.engine.grammar import CONDITION, HAVING, ExprError, next_token, parse_tree
from rules.engine.quantities import parse_quantity

AGG_FUNCTIONS = ("sum", "min", "max", "mean", "p50", "p90", "p95", "p99", "distinct")
AGG_BARE = ("count", "rate")
AGG_ROWS = ("first", "last")
COMPARE = ("<", "<=", ">", ">=", "==", "!=")
KEYWORDS = ("and", "or", "not", "of")

__all__ = ["ExprError", "parse_condition", "parse_having", "condition_names", "having_aggregates",
           "metric_name", "parse_metric_name"]


# ---------------------------------------------------------------- nodes shared by both

_Operand = TypeVar("_Operand")


@dataclass(frozen=True)
class Not(Generic[_Operand]):
    operand: _Operand             # a Condition in a condition, a Having in a having


@dataclass(frozen=True)
class And:
    terms: tuple


@dataclass(frozen=True)
class Or:
    terms: tuple


# ---------------------------------------------------------------- condition

@dataclass(frozen=True)
class SelectionRef:
    name: str


@dataclass(frozen=True)
class Quantified:
    """`N of pattern` / `all of pattern` / `any of pattern`, expanded to the names it matches."""
    quantity: int | Literal["all"]
    names: tuple[str, ...]


Condition = Union[SelectionRef, Quantified, "Not[Condition]", And, Or]


def parse_condition(text: str, selections: list[str]) -> Condition:
    """The condition over selection names. `N of pattern` (pattern: a name with `*`
    wildcards, or `them`) expands to the matching selections now, so evaluation only sees
    plain names."""
    return _ConditionBuilder(text, list(selections)).build(parse_tree(text, CONDITION))


class _ConditionBuilder:
    def __init__(self, text: str, selections: list[str]):
        self.text, self.selections = text, selections

    def build(self, tree: lark.Tree) -> Condition:
        return _build(tree, self.node)

    def node(self, tree: lark.Tree, children: list) -> Condition:
        kind = tree.data
        if kind == "selection":
            return self.selection(tree.children[0])
        if kind == "quantified":
            head, _of, pattern = tree.children
            return self.quantified(head, pattern)
        return _boolean(kind, children)

    def selection(self, token) -> SelectionRef:
        if token.value not in self.selections:
            raise ExprError(f"condition names selection {token.value!r} which is not defined under match "
                            f"(defined: {', '.join(self.selections)})", token.start_pos)
        return SelectionRef(token.value)

    def quantified(self, head, pattern) -> Condition:
        if head.type == "NUMBER" and not head.value.isdigit():
            raise ExprError(f"{head.value!r}: expected a whole number before 'of'", head.start_pos)
        if head.type == "NAME" and head.value not in ("all", "any"):
            self.selection(head)        # `sel of x`: a selection name, then a stray word
            raise ExprError(f"unexpected {'of'!r}; combine terms with and / or",
                            next_token(self.text, head.end_pos, CONDITION)[1])
        names = self.expand(pattern)
        quantity: int | Literal["all"] = "all" if head.value == "all" else 1 if head.value == "any" else int(head.value)
        if quantity != "all" and quantity > len(names):
            raise ExprError(f"'{head.value} of {pattern.value}' can never hold: only {len(names)} selection(s) match",
                            head.start_pos)
        return Quantified(quantity, tuple(names))

    def expand(self, pattern) -> list[str]:
        if pattern.value == "them":
            return list(self.selections)
        # fnmatch, not a regex of ".*" joins: those backtrack polynomially ("a*a*a*...b").
        names = [s for s in self.selections if fnmatchcase(s, pattern.value)]
        if not names:
            raise ExprError(f"{pattern.value!r} matches no selection (defined: {', '.join(self.selections)})",
                            pattern.start_pos)
        return names


def condition_names(node: Condition) -> set[str]:
    if isinstance(node, SelectionRef):
        return {node.name}
    if isinstance(node, Quantified):
        return set(node.names)
    if isinstance(node, Not):
        return condition_names(node.operand)
    return set().union(*(condition_names(n) for n in node.terms))


# ---------------------------------------------------------------- having

@dataclass(frozen=True)
class Number:
    value: float


@dataclass(frozen=True)
class Text:
    value: str


@dataclass(frozen=True)
class Aggregate:
    """An aggregate over a group's rows: count, rate, p99(dur), first.name ..."""
    fn: str
    field: str | None = None

    @property
    def key(self) -> tuple[str, str | None]:
        return self.fn, self.field


@dataclass(frozen=True)
class Compare:
    op: str                      # one of COMPARE
    left: "Having"
    right: "Having"


@dataclass(frozen=True)
class Arithmetic:
    op: str                      # + - * /
    left: "Having"
    right: "Having"


@dataclass(frozen=True)
class Negate:
    operand: "Having"


Having = Union[Number, Text, Aggregate, Compare, Arithmetic, Negate, "Not[Having]", And, Or]


def parse_having(text: str) -> Having:
    return _HavingBuilder(text).build(parse_tree(text, HAVING))


class _HavingBuilder:
    def __init__(self, text: str):
        self.text = text

    def build(self, tree: lark.Tree) -> Having:
        return _build(tree, self.node)

    def node(self, tree: lark.Tree, children: list) -> Having:
        kind = tree.data
        tokens: list[Any] = tree.children  # lark types them Token | Tree: where read below, the grammar has tokens
        if kind == "number":
            value = parse_quantity(tokens[0].value)
            if value is None:
                raise ExprError(f"{tokens[0].value!r} is not a number, a duration (10ms, 2s) or a size (2GiB)",
                                tokens[0].start_pos)
            return Number(value)
        if kind == "string":
            return Text(tokens[0].value[1:-1])
        if kind == "bare":
            return self.bare(tokens[0])
        if kind == "call":
            fn, _lpar, field, _rpar = tokens
            return self.call(fn, field)
        if kind == "neg":
            return Negate(children[1])
        if kind == "comparison":
            return Compare(tokens[1].value, children[0], children[2])
        if kind in ("arith", "term"):
            node = children[0]
            for i in range(1, len(children), 2):
                node = Arithmetic(tokens[i].value, node, children[i + 1])
            return node
        return _boolean(kind, children)

    def bare(self, token) -> Aggregate:
        name = token.value
        if name in AGG_BARE:
            return Aggregate(name)
        head, _, rest = name.partition(".")
        if head in AGG_ROWS and rest:
            _check_field(rest, token.start_pos)
            return Aggregate(head, rest)
        if name in AGG_FUNCTIONS:
            found, pos = next_token(self.text, token.end_pos, HAVING)
            raise ExprError(f"expected '(' after {name}, found {found!r}" if found
                            else f"expected '(' after {name} at the end", pos)
        raise _unknown_aggregate(token)

    def call(self, fn, field) -> Aggregate:
        if fn.value in AGG_BARE:    # count(...): count takes no field
            found, pos = next_token(self.text, fn.end_pos, HAVING)
            raise ExprError(f"unexpected {found!r}; combine terms with and / or", pos)
        if fn.value not in AGG_FUNCTIONS:
            raise _unknown_aggregate(fn)
        _check_field(field.value, field.start_pos)
        return Aggregate(fn.value, field.value)


def _unknown_aggregate(token) -> ExprError:
    known = ", ".join(list(AGG_BARE) + [f"{f}(field)" for f in AGG_FUNCTIONS] + ["first.field", "last.field"])
    return ExprError(f"unknown aggregate {token.value!r} (known: {known})", token.start_pos)


def _check_field(field: str, pos: int) -> None:
    if "*" in field or any(part.startswith("_") for part in field.split(".")):
        raise ExprError(f"{field!r} is not a field name", pos)


def having_aggregates(node: Having) -> set[tuple[str, str | None]]:
    """Every (fn, field) the expression needs."""
    if isinstance(node, Aggregate):
        return {node.key}
    if isinstance(node, (Number, Text)):
        return set()
    if isinstance(node, (Negate, Not)):
        return having_aggregates(node.operand)
    if isinstance(node, (And, Or)):
        return set().union(*(having_aggregates(n) for n in node.terms))
    return having_aggregates(node.left) | having_aggregates(node.right)


# ---------------------------------------------------------------- shared

def _boolean(kind: str, children: list):
    """The levels both languages share; `children` still hold the keyword and parenthesis tokens."""
    nodes = [c for c in children if not isinstance(c, lark.Token)]
    if kind in ("negation", "group"):
        return Not(nodes[0]) if kind == "negation" else nodes[0]
    if kind == "and_":
        return And(tuple(nodes))
    if kind == "or_":
        return Or(tuple(nodes))
    if kind == "start":
        return children[0]
    raise AssertionError(f"grammar rule {kind!r} has no node")


def _build(tree: lark.Tree, make):
    """Bottom-up over the parse tree without recursion: make(tree, built children), where
    a child token stays a token (parse_tree bounded the depth, not the Python stack)."""
    built: dict[int, object] = {}
    stack = [(tree, False)]
    while stack:
        node, children_done = stack.pop()
        if not children_done:
            stack.append((node, True))
            stack.extend((c, False) for c in node.children if isinstance(c, lark.Tree))
            continue
        children = [built.pop(id(c)) if isinstance(c, lark.Tree) else c for c in node.children]
        built[id(node)] = make(node, children)
    return built[id(tree)]


def metric_name(fn: str, field: str | None) -> str:
    """The key of an aggregate in a finding's metrics: count, rate, p99_dur, max_attrs.bytes."""
    return fn if field is None else f"{fn}.{field}" if fn in AGG_ROWS else f"{fn}_{field}"


def parse_metric_name(name: str) -> tuple[str, str | None] | None:
    """Inverse of metric_name for templates ({metrics.p99_dur}); None if not an aggregate."""
    if name in AGG_BARE:
        return name, None
    fn, _, field = name.partition("_")
    if fn in AGG_FUNCTIONS and field:
        return fn, field
    return None
