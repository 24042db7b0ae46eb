"""The two small expression languages of a rule, parsed into tuples (never eval'ed).

`condition` combines selection names:   errors and not (benign or 1 of filter_*)
`aggregate.having` tests group metrics: count >= 3 and p99(dur) > 20ms or rate > 100

Both are tokenized by one regex and parsed by recursive descent with a depth limit.
Errors carry the character offset so the loader can point at line and column.
"""
from __future__ import annotations

import re
from fnmatch import fnmatchcase

from rules import limits
from rules.quantities import parse_quantity

AGG_FUNCTIONS = ("sum", "min", "max", "mean", "p50", "p90", "p95", "p99", "distinct")
AGG_BARE = ("count", "rate")
AGG_ROWS = ("first", "last")
COMPARE = ("<", "<=", ">", ">=", "==", "!=")
KEYWORDS = ("and", "or", "not", "of")


class ExprError(ValueError):
    def __init__(self, message: str, offset: int = 0):
        super().__init__(message)
        self.message, self.offset = message, offset


_TOKEN_TEMPLATE = r"""
    (?P<ws>\s+)
  | (?P<num>[0-9]+(?:\.[0-9]+)?(?:[A-Za-zµ]+)?)
  | (?P<str>"[^"\\]{0,500}"|'[^'\\]{0,500}')
  | (?P<name>NAME)
  | (?P<op><=|>=|==|!=|<|>|\(|\)|\+|-|\*|/|,)
"""
# condition names may hold `*` wildcards (sel_*); in having, `*` multiplies
_CONDITION_TOKEN = re.compile(_TOKEN_TEMPLATE.replace("NAME", r"[A-Za-z_*][A-Za-z0-9_*]*"), re.VERBOSE)
_HAVING_TOKEN = re.compile(_TOKEN_TEMPLATE.replace("NAME", r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*"), re.VERBOSE)


def tokenize(text: str, token_re: re.Pattern) -> list[tuple[str, str, int]]:
    if len(text) > limits.MAX_CONDITION_LENGTH:
        raise ExprError(f"expression is {len(text)} characters long (limit {limits.MAX_CONDITION_LENGTH})", 0)
    tokens, pos = [], 0
    while pos < len(text):
        m = token_re.match(text, pos)
        if not m:
            raise ExprError(f"unexpected character {text[pos]!r}", pos)
        if m.lastgroup != "ws":
            tokens.append((m.lastgroup, m.group(), pos))
        pos = m.end()
    tokens.append(("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str, token_re: re.Pattern):
        self.tokens = tokenize(text, token_re)
        self.i = 0
        self.depth = 0

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.i]

    def take(self) -> tuple[str, str, int]:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def accept(self, value: str) -> bool:
        kind, text, _ = self.peek()
        if kind in ("op", "name") and text == value:
            self.i += 1
            return True
        return False

    def expect(self, value: str, what: str) -> None:
        if not self.accept(value):
            kind, text, pos = self.peek()
            raise ExprError(f"expected {what}, found {text!r}" if text else f"expected {what} at the end", pos)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > limits.MAX_CONDITION_DEPTH:
            raise ExprError(f"expression nests deeper than {limits.MAX_CONDITION_DEPTH} levels", self.peek()[2])

    def done(self) -> None:
        kind, text, pos = self.peek()
        if kind != "end":
            raise ExprError(f"unexpected {text!r}; combine terms with and / or", pos)

    def boolean(self, unary):
        """or / and / not levels shared by both languages."""
        self.enter()
        terms = [self._and(unary)]
        while self.accept("or"):
            terms.append(self._and(unary))
        self.depth -= 1
        return terms[0] if len(terms) == 1 else ("or", terms)

    def _and(self, unary):
        terms = [self._not(unary)]
        while self.accept("and"):
            terms.append(self._not(unary))
        return terms[0] if len(terms) == 1 else ("and", terms)

    def _not(self, unary):
        if self.accept("not"):
            self.enter()
            node = ("not", self._not(unary))
            self.depth -= 1
            return node
        return unary()


# ---------------------------------------------------------------- condition

def parse_condition(text: str, selections: list[str]):
    """AST over selection names: ("sel", name) | ("not", x) | ("and"/"or", [x...]).

    `N of pattern` / `all of pattern` / `any of pattern` (pattern: a name with `*`
    wildcards, or `them`) expands to the matching selections now, so evaluation only
    sees plain names: ("of", N | "all", [names]).
    """
    p = _Parser(text, _CONDITION_TOKEN)

    def atom():
        kind, tok, pos = p.take()
        if tok == "(":
            node = p.boolean(atom)
            p.expect(")", "')'")
            return node
        if kind == "num" or tok in ("all", "any"):
            if kind == "num" and not tok.isdigit():
                raise ExprError(f"{tok!r}: expected a whole number before 'of'", pos)
            if not p.accept("of"):
                if kind == "num":
                    raise ExprError(f"expected 'of' after {tok}", p.peek()[2])
                return _selection(tok, pos)
            pkind, pattern, ppos = p.take()
            if pkind != "name" or pattern in KEYWORDS:
                raise ExprError(f"expected selection names (e.g. sel_* or them) after 'of', found {pattern!r}", ppos)
            names = _expand(pattern, ppos)
            quantity = "all" if tok == "all" else 1 if tok == "any" else int(tok)
            if quantity != "all" and quantity > len(names):
                raise ExprError(f"'{tok} of {pattern}' can never hold: only {len(names)} selection(s) match", pos)
            return ("of", quantity, names)
        if kind == "name" and tok not in KEYWORDS:
            return _selection(tok, pos)
        raise ExprError(f"expected a selection name, 'not' or '(' but found {tok!r}" if tok
                        else "expected a selection name at the end", pos)

    def _selection(name, pos):
        if name not in selections:
            raise ExprError(f"condition names selection {name!r} which is not defined under match "
                            f"(defined: {', '.join(selections)})", pos)
        return ("sel", name)

    def _expand(pattern, pos):
        if pattern == "them":
            return list(selections)
        # fnmatch, not a regex of ".*" joins: those backtrack polynomially ("a*a*a*...b").
        names = [s for s in selections if fnmatchcase(s, pattern)]
        if not names:
            raise ExprError(f"{pattern!r} matches no selection (defined: {', '.join(selections)})", pos)
        return names

    node = p.boolean(atom)
    p.done()
    return node


def condition_names(node) -> set[str]:
    if node[0] == "sel":
        return {node[1]}
    if node[0] == "of":
        return set(node[2])
    if node[0] == "not":
        return condition_names(node[1])
    return set().union(*(condition_names(n) for n in node[1]))


# ---------------------------------------------------------------- having

def parse_having(text: str):
    """AST: ("num", x) | ("str", s) | ("agg", fn, field|None) | ("cmp", op, a, b) |
    ("bin", op, a, b) | ("neg", x) | ("not", x) | ("and"/"or", [x...])."""
    p = _Parser(text, _HAVING_TOKEN)

    def comparison():
        left = arith()
        kind, tok, pos = p.peek()
        if kind == "op" and tok in COMPARE:
            p.take()
            return ("cmp", tok, left, arith())
        return left

    def arith():
        node = term()
        while p.peek()[1] in ("+", "-") and p.peek()[0] == "op":
            node = ("bin", p.take()[1], node, term())
        return node

    def term():
        node = factor()
        while p.peek()[1] in ("*", "/") and p.peek()[0] == "op":
            node = ("bin", p.take()[1], node, factor())
        return node

    def factor():
        kind, tok, pos = p.take()
        if tok == "-" and kind == "op":
            p.enter()
            node = ("neg", factor())
            p.depth -= 1
            return node
        if tok == "(" and kind == "op":
            node = p.boolean(comparison)
            p.expect(")", "')'")
            return node
        if kind == "num":
            value = parse_quantity(tok)
            if value is None:
                raise ExprError(f"{tok!r} is not a number, a duration (10ms, 2s) or a size (2GiB)", pos)
            return ("num", value)
        if kind == "str":
            return ("str", tok[1:-1])
        if kind == "name":
            return aggregate(tok, pos)
        raise ExprError(f"expected a number, an aggregate or '(' but found {tok!r}" if tok
                        else "expression ends too early", pos)

    def aggregate(tok, pos):
        if tok in AGG_BARE:
            return ("agg", tok, None)
        head, _, rest = tok.partition(".")
        if head in AGG_ROWS and rest:
            _check_field(rest, pos)
            return ("agg", head, rest)
        if tok in AGG_FUNCTIONS:
            p.expect("(", f"'(' after {tok}")
            fkind, field, fpos = p.take()
            if fkind != "name" or field in KEYWORDS:
                raise ExprError(f"expected a field name inside {tok}(...)", fpos)
            _check_field(field, fpos)
            p.expect(")", "')'")
            return ("agg", tok, field)
        known = ", ".join(list(AGG_BARE) + [f"{f}(field)" for f in AGG_FUNCTIONS] + ["first.field", "last.field"])
        raise ExprError(f"unknown aggregate {tok!r} (known: {known})", pos)

    node = p.boolean(comparison)
    p.done()
    return node


def _check_field(field: str, pos: int) -> None:
    if "*" in field or any(part.startswith("_") for part in field.split(".")):
        raise ExprError(f"{field!r} is not a field name", pos)


def having_aggregates(node) -> set[tuple[str, str | None]]:
    """Every ("fn", field) the expression needs."""
    tag = node[0]
    if tag == "agg":
        return {(node[1], node[2])}
    if tag in ("num", "str"):
        return set()
    if tag in ("neg", "not"):
        return having_aggregates(node[1])
    if tag in ("and", "or"):
        return set().union(*(having_aggregates(n) for n in node[1]))
    return having_aggregates(node[2]) | having_aggregates(node[3])


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
