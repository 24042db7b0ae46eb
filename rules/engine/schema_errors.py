"""The rule JSON Schema (rules/schema.json) and its errors explained in a rule author's words,
at the position of the key or value at fault (a close key name suggested)."""
from __future__ import annotations

import difflib
import functools
import json
import sys
from pathlib import Path

from rules.engine.errors import RuleError
from rules.engine.rule_yaml import mark_error, node_at

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schema.json"


@functools.lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


@functools.lru_cache(maxsize=1)
def _validator():
    return _jsonschema().Draft202012Validator(schema())


@functools.cache
def _jsonschema():
    """jsonschema, imported when a rule is first checked (0.15 s of imports).

    Its format module imports rfc3987_syntax wherever that is installed (Jupyter's
    `jsonschema[format-nongpl]` brings it along), which builds 38 Lark grammars at import:
    ~1 s on a CLI run with a cold rule-pack cache. The rule schema uses no IRI format, so
    where nothing loaded rfc3987_syntax yet, jsonschema is loaded without it."""
    blocked = "rfc3987_syntax" not in sys.modules
    if blocked:
        sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # an ImportError to jsonschema
    try:
        import jsonschema
        import jsonschema.exceptions
    finally:
        if blocked:
            del sys.modules["rfc3987_syntax"]  # anything else may import it as usual
    return jsonschema


_PATTERN_HINTS = {
    ("id",): "a dotted lowercase id like cuda-graph.capture-aborted (letters, digits, _ and -; at least one dot)",
    ("root_cause",): "a dotted lowercase key like nccl.timeout.stream_blocked",
    ("references",): "an http(s) URL",
    ("tests",): "a scenario path relative to the corpus root, like h200/cudagraph_abort",
    ("aggregate",): "a duration like 500ms, 10s or 1m",
    ("sequence",): "a duration like 500ms, 10s or 1m",
    ("fingerprint",): "a field name (a column or attrs.<path>)",
}


def _where(path) -> str:
    return ".".join(str(p) for p in path) or "the rule"


def schema_errors(doc, filename: str) -> list[RuleError]:
    best_match = _jsonschema().exceptions.best_match
    out = []
    for err in sorted(_validator().iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        if err.validator in ("oneOf", "anyOf") and err.context:
            err = best_match(err.context)
        out.extend(_explain_schema_error(err, doc, filename))
    return out


def faulty_keys(doc) -> set[str]:
    """The top-level keys the schema finds fault with: the key an error sits under, or each
    required key that is missing ("" for a fault of the whole rule)."""
    keys: set[str] = set()
    for err in _validator().iter_errors(doc):
        path = list(err.absolute_path)
        if path:
            keys.add(str(path[0]))
        elif err.validator == "required" and isinstance(err.instance, dict):
            keys |= {k for k in err.validator_value if k not in err.instance}
        else:
            keys.add("")
    return keys


def _explain_schema_error(err, doc, filename: str) -> list[RuleError]:
    path = list(err.absolute_path)
    where = _where(path)
    node = node_at(doc, path)
    mark = node.start_mark if node is not None else None
    kind = err.validator
    if kind == "additionalProperties" and isinstance(err.instance, dict):
        known = sorted(err.schema.get("properties", {}))
        out = []
        for key in err.instance:
            if key in known or str(key).startswith("x-"):
                continue
            guess = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {guess[0]!r}?)" if guess else f" (known keys: {', '.join(known)})"
            knode = node_at(doc, path + [key], want_key=True)
            out.append(mark_error(filename, knode.start_mark if knode else mark,
                                  f"unknown key {key!r} in {where}{hint}"))
        return out
    if kind == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        return [mark_error(filename, mark, f"{where} is missing the required key {missing!r}")]
    if kind == "enum":
        return [mark_error(filename, mark, f"{where}: {err.instance!r} is not one of {', '.join(map(str, err.validator_value))}")]
    if kind == "type":
        wanted = err.validator_value if isinstance(err.validator_value, str) else " or ".join(err.validator_value)
        return [mark_error(filename, mark, f"{where} must be {_article(wanted)}, not {type_name(err.instance)}")]
    if kind == "pattern":
        if "propertyNames" in err.schema_path:
            return [mark_error(filename, mark, f"{err.instance!r} in {where} is not a valid name "
                                               + ("(selection names: letters, digits, _)" if path == ["match"]
                                                  else "(write field|modifier, e.g. name|contains or attrs.key|gt)"))]
        hint = _PATTERN_HINTS.get(tuple(path[:1]), f"text matching {err.validator_value}")
        return [mark_error(filename, mark, f"{where}: {err.instance!r} is not {hint}")]
    if kind == "not" and path == []:
        node = node_at(doc, ["sequence"], want_key=True)
        return [mark_error(filename, node.start_mark, "use either aggregate or sequence, not both")]
    message = err.message if len(err.message) < 200 else err.message[:200] + "…"
    return [mark_error(filename, mark, f"{where}: {message}")]


def _article(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + {"object": "mapping", "array": "list"}.get(word, word)


def type_name(value) -> str:
    for kind, name in ((dict, "a mapping"), (list, "a list"), (str, "text"), (bool, "true/false"),
                       ((int, float), "a number"), (type(None), "empty")):
        if isinstance(value, kind):
            return name
    return type(value).__name__
