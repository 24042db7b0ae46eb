"""The grammar of a rule's two expression languages, parsed by lark (LALR, never eval'ed).

`condition` combines selection names:   errors and not (benign or 1 of filter_*)
`aggregate.having` tests group metrics: count >= 3 and p99(dur) > 20ms or rate > 100

Both share the boolean levels (or / and / not / parentheses). Every token stays in the tree
(keywords and parentheses included) so positions can be reported after them. Tokens come from one regex
per language (the same tokens the messages quote); lark turns them into a parse tree and
`rules.engine.expressions` turns that into dataclass nodes. Syntax errors become ExprError with the
character offset of the offending token, so the loader can point at line and column.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import lark
from lark.lexer import Lexer, Token

from rules.engine import limits


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

_OPERATORS = {"(": "LPAR", ")": "RPAR", "+": "PLUS", "-": "MINUS", "*": "STAR", "/": "SLASH", ",": "COMMA",
              "<": "COMPARE", "<=": "COMPARE", ">": "COMPARE", ">=": "COMPARE", "==": "COMPARE", "!=": "COMPARE"}
_BOOLEAN_WORDS = {"and": "AND", "or": "OR", "not": "NOT"}

_BOOLEAN_RULES = r"""
start: or_
?or_: and_ (OR and_)*
?and_: not_ (AND not_)*
?not_: NOT not_ -> negation
     | UNARY
"""
CONDITION_GRAMMAR = _BOOLEAN_RULES.replace("UNARY", "atom") + r"""
?atom: NAME -> selection
     | NAME OF NAME -> quantified
     | NUMBER OF NAME -> quantified
     | LPAR or_ RPAR -> group
%declare NAME NUMBER STRING OR AND NOT OF LPAR RPAR PLUS MINUS STAR SLASH COMMA COMPARE
"""
HAVING_GRAMMAR = _BOOLEAN_RULES.replace("UNARY", "comparison") + r"""
?comparison: arith (COMPARE arith)?
?arith: term ((PLUS | MINUS) term)*
?term: factor ((STAR | SLASH) factor)*
?factor: MINUS factor -> neg
       | LPAR or_ RPAR -> group
       | NUMBER -> number
       | STRING -> string
       | NAME -> bare
       | NAME LPAR NAME RPAR -> call
%declare NAME NUMBER STRING OR AND NOT OF LPAR RPAR PLUS MINUS STAR SLASH COMMA COMPARE
"""
_NESTING = ("group", "negation", "neg")       # what counts towards MAX_CONDITION_DEPTH


@dataclass(frozen=True, eq=False)   # hashed by identity: the parser cache is per language
class Language:
    """One of the two languages: its tokens and grammar, and words that are keywords in it."""
    name: str
    token_re: re.Pattern
    grammar: str
    keywords: dict[str, str]


CONDITION = Language("condition", _CONDITION_TOKEN, CONDITION_GRAMMAR, {**_BOOLEAN_WORDS, "of": "OF"})
HAVING = Language("having", _HAVING_TOKEN, HAVING_GRAMMAR, _BOOLEAN_WORDS)


def tokenize(text: str, language: Language) -> list[Token]:
    """Lark tokens with their offsets; the last one is `$END` at len(text)."""
    if len(text) > limits.MAX_CONDITION_LENGTH:
        raise ExprError(f"expression is {len(text)} characters long (limit {limits.MAX_CONDITION_LENGTH})", 0)
    tokens, pos = [], 0
    while pos < len(text):
        m = language.token_re.match(text, pos)
        if not m:
            raise ExprError(f"unexpected character {text[pos]!r}", pos)
        kind, value = m.lastgroup, m.group()
        assert kind is not None  # every alternative of the pattern is a named group
        if kind != "ws":
            if kind == "name":
                kind = language.keywords.get(value, "NAME")
            elif kind == "op":
                kind = _OPERATORS[value]
            else:
                kind = {"num": "NUMBER", "str": "STRING"}[kind]
            tokens.append(Token(kind, value, start_pos=pos, end_pos=m.end()))
        pos = m.end()
    tokens.append(Token("$END", "", start_pos=len(text), end_pos=len(text)))
    return tokens


class _ListLexer(Lexer):
    """Hands lark the tokens `tokenize` made (lark calls lex(text))."""
    language: Language

    def __init__(self, lexer_conf):
        pass

    def lex(self, text):
        return iter(tokenize(text, self.language)[:-1])


@functools.lru_cache(maxsize=None)
def _parser(language: Language) -> lark.Lark:
    lexer = type(f"{language.name.title()}Lexer", (_ListLexer,), {"language": language})
    return lark.Lark(language.grammar, parser="lalr", lexer=lexer)


def build_parsers() -> None:
    """Both languages' parsers built now (~0.06 s of lark's table building), not at the first
    rule compiled: diagnosis.engine.pipeline does it in a thread while the files parse."""
    for language in (CONDITION, HAVING):
        _parser(language)


def parse_tree(text: str, language: Language) -> lark.Tree:
    """The lark tree of an expression; ExprError at the offending token (syntax, nesting)."""
    tokens = tokenize(text, language)
    try:
        tree = _parser(language).parse(text)
    except lark.UnexpectedToken as e:
        raise _syntax_error(e, tokens, language) from None
    _check_depth(tree, tokens)
    return tree


def _check_depth(tree: lark.Tree, tokens: list[Token]) -> None:
    """Nesting of parentheses and negations, counted without recursion (a 2,000-character
    expression may nest a thousand levels). The error points after the opening token."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if node.data in _NESTING:
            depth += 1
            if depth > limits.MAX_CONDITION_DEPTH:
                first = node.children[0]
                assert isinstance(first, Token)  # the opening parenthesis or `not`
                opening = next(i for i, t in enumerate(tokens) if t.start_pos == first.start_pos)
                raise ExprError(f"expression nests deeper than {limits.MAX_CONDITION_DEPTH} levels",
                                _start(tokens[opening + 1]))
        stack.extend((child, depth) for child in node.children if isinstance(child, lark.Tree))


def _syntax_error(e: lark.UnexpectedToken, tokens: list[Token], language: Language) -> ExprError:
    """The message a rule author gets for what lark expected at the offending token."""
    at = len(tokens) - 1 if e.token.type == "$END" else next(
        i for i, t in enumerate(tokens) if t.start_pos == e.token.start_pos)
    token, expected = tokens[at], set(e.expected)
    found, pos = token.value, _start(token)
    before = tokens[at - 1] if at else None

    def expect(what: str) -> ExprError:
        return ExprError(f"expected {what}, found {found!r}" if found else f"expected {what} at the end", pos)

    if language is CONDITION:
        if "OF" in expected and before is not None and before.type == "NUMBER":
            if not before.value.isdigit():
                return ExprError(f"{before.value!r}: expected a whole number before 'of'", _start(before))
            return ExprError(f"expected 'of' after {before.value}", pos)
        if expected == {"NAME"}:
            return ExprError(f"expected selection names (e.g. sel_* or them) after 'of', found {found!r}", pos)
        if "NAME" in expected:
            return ExprError(f"expected a selection name, 'not' or '(' but found {found!r}" if found
                             else "expected a selection name at the end", pos)
    else:
        if "NUMBER" in expected:
            return ExprError(f"expected a number, an aggregate or '(' but found {found!r}" if found
                             else "expression ends too early", pos)
        if expected == {"NAME"} and at >= 2:
            return ExprError(f"expected a field name inside {tokens[at - 2].value}(...)", pos)
    if sum(t.type == "LPAR" for t in tokens[:at]) > sum(t.type == "RPAR" for t in tokens[:at]):
        return expect("')'")
    return ExprError(f"unexpected {found!r}; combine terms with and / or", pos)


def _start(token: Token) -> int:
    assert token.start_pos is not None  # tokenize gives every token its offset
    return token.start_pos


def next_token(text: str, end: int, language: Language) -> tuple[str, int]:
    """(text, offset) of the token after offset `end` ('' at the end of the expression)."""
    m = re.compile(r"\s*").match(text, end)
    assert m is not None  # \s* matches anywhere
    pos = m.end()
    token = language.token_re.match(text, pos)
    return (token.group() if token and pos < len(text) else ""), pos
