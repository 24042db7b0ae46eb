"""Finding text templates: `{count} errors on {host}, first at {first.ts|time}`.

A small tokenizer, not str.format: a placeholder is a dotted path whose first part is
whitelisted by the rule (count, rate, duration, start, end, first, last, metrics, the
rule's group keys, sequence steps), followed by either a format spec from a fixed set
(`:.1f`, `:,`, `:,.0f`, `:.2%`, `:.3e`) or one filter (`|bytes`, `|dur`, `|ms`, `|s`,
`|time`). No attribute access on objects, no indexing, no positional fields: values are
looked up by the evaluator in plain dicts and rendered as text.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone

import orjson

from rules.engine import limits
from rules.engine.quantities import human_bytes, human_duration

SPEC_RE = re.compile(r"^,?(\.[0-9])?[fe%]?$")
SEGMENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
PLACEHOLDER_RE = re.compile(r"^([^:|]*)(?::([^|]*)|\|([a-z]+))?$")
ROW_ROOTS = ("first", "last")     # + sequence step names: {<step>.<field>}
SCALAR_ROOTS = ("count", "rate", "duration", "start", "end")


def _time(ns) -> str:
    dt = datetime.fromtimestamp(float(ns) / 1e9, tz=timezone.utc)
    return dt.strftime("%Y-%m-%d %H:%M:%S.") + f"{dt.microsecond // 1000:03d} UTC"


FILTERS = {
    "bytes": human_bytes,
    "dur": human_duration,
    "ms": lambda ns: f"{float(ns) / 1e6:.3g} ms",
    "s": lambda ns: f"{float(ns) / 1e9:.3g} s",
    "time": _time,
}


class TemplateError(ValueError):
    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.message, self.offset = message, offset


@dataclass(frozen=True)
class Placeholder:
    path: tuple[str, ...]
    spec: str | None = None
    filter: str | None = None


@dataclass(frozen=True)
class Template:
    parts: tuple[str | Placeholder, ...]

    def placeholders(self) -> list[Placeholder]:
        return [p for p in self.parts if isinstance(p, Placeholder)]

    def render(self, lookup) -> str:
        """`lookup(path) -> value | None`; a missing value renders as '?'."""
        out = []
        for part in self.parts:
            out.append(part if isinstance(part, str) else _render_value(lookup(part.path), part))
        return "".join(out)


def parse_template(text: str, roots: set[str], row_roots: set[str]) -> Template:
    """Split `text` into literal text and placeholders; refuse anything not whitelisted.

    roots: names usable on their own (count, group keys ...); row_roots: names that need a
    field after them (first, last, sequence steps); `metrics` needs an aggregate name.
    """
    if len(text) > limits.MAX_TEMPLATE_LENGTH:
        raise TemplateError(f"template is {len(text)} characters long (limit {limits.MAX_TEMPLATE_LENGTH})", 0)
    parts: list[str | Placeholder] = []
    literal, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "{}" and i + 1 < n and text[i + 1] == c:   # {{ and }} are literal braces
            literal.append(c)
            i += 2
            continue
        if c == "}":
            raise TemplateError("single '}' in template (write '}}' for a literal brace)", i)
        if c != "{":
            literal.append(c)
            i += 1
            continue
        end = text.find("}", i + 1)
        if end < 0:
            raise TemplateError("'{' is never closed (write '{{' for a literal brace)", i)
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(_placeholder(text[i + 1:end], i, roots, row_roots))
        i = end + 1
    if literal:
        parts.append("".join(literal))
    return Template(tuple(parts))


def _placeholder(body: str, offset: int, roots: set[str], row_roots: set[str]) -> Placeholder:
    m = PLACEHOLDER_RE.match(body)
    if not m or "{" in body:
        raise TemplateError(f"{{{body}}} is not a placeholder like {{count}} or {{first.name}}", offset)
    name, spec, filt = m.group(1).strip(), m.group(2), m.group(3)
    path = tuple(name.split("."))
    allowed = sorted(roots | {f"{r}.<field>" for r in row_roots} | {"metrics.<name>"})
    if not name or not all(SEGMENT_RE.match(s) for s in path):
        raise TemplateError(f"{{{body}}}: placeholders are names like count or first.name, not {name!r} "
                            f"(allowed: {', '.join(allowed)})", offset)
    if name in roots:
        pass
    elif path[0] in row_roots:
        if len(path) < 2:
            raise TemplateError(f"{{{name}}} needs a field, e.g. {{{name}.name}} or {{{name}.attrs.key}}", offset)
    elif path[0] == "metrics":
        if len(path) < 2:
            raise TemplateError(f"{{{name}}}: write {{metrics.<name>}}, e.g. {{metrics.count}} or {{metrics.p99_dur}}", offset)
    else:
        raise TemplateError(f"unknown placeholder {{{name}}} (allowed: {', '.join(allowed)})", offset)
    if spec is not None and not SPEC_RE.match(spec):
        raise TemplateError(f"format spec {spec!r} is not allowed (use :.1f, :, :,.0f, :.2%, :.3e)", offset)
    if filt is not None and filt not in FILTERS:
        raise TemplateError(f"unknown filter |{filt} (known: {', '.join('|' + f for f in FILTERS)})", offset)
    return Placeholder(path, spec or None, filt)


def _render_value(value, ph: Placeholder) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "?"
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalar
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    try:
        if ph.filter and number:
            return FILTERS[ph.filter](value)
        if ph.spec and number:
            return format(value, ph.spec)
    except (ValueError, OverflowError, OSError):
        pass
    if isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        # people read "a, b" (or sentences one after another), not a JSON array
        sentences = all(isinstance(v, str) and v.rstrip().endswith((".", "!", "?")) for v in value)
        text = (" " if sentences else ", ").join(str(v) for v in value)
    elif isinstance(value, (dict, list)):
        text = orjson.dumps(value, default=str).decode()
    else:
        text = str(value)
    if len(text) > limits.MAX_RENDERED_VALUE:
        text = text[:limits.MAX_RENDERED_VALUE - 1] + "…"
    return text
