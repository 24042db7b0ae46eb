"""What a schema-valid rule can still get wrong: selections and the whole rule that do not
compile, and a capture plan that does not parse, each at its position in the YAML."""
from __future__ import annotations

from rules.engine.capture_plans import CapturePlanError, parse_plan
from rules.engine.compiler import CompileError, compile_rule
from rules.engine.errors import RuleError
from rules.engine.rule import Rule
from rules.engine.rule_yaml import mark_error, node_at, unmarked


def compile_errors(rule: Rule, doc, filename: str) -> list[RuleError]:
    """Every problem of the rule, in the order of the document: each selection's, the
    condition's or sequence's, the aggregate's and each template's (compile_rule checks every
    part even when an earlier one failed), one per position."""
    try:
        compile_rule(rule)
    except CompileError as e:
        errors: dict[tuple[int, int, str], RuleError] = {}
        for problem in e.every:
            error = _compile_error(problem, doc, filename)
            errors.setdefault((error.line, error.col, error.message), error)
        return sorted(errors.values(), key=lambda r: (r.line, r.col))
    return []


def capture_errors(doc, filename: str) -> list[RuleError]:
    if "capture" not in doc:
        return []
    try:
        parse_plan(unmarked(doc["capture"]))
    except CapturePlanError as e:
        return [mark_error(filename, doc.value_nodes["capture"].start_mark, str(e))]
    return []


def _compile_error(e, doc, filename: str) -> RuleError:
    node = node_at(doc, list(e.path), want_key=e.path[:1] == ("match",) and isinstance(e.path[-1], str))
    mark = node.start_mark if node is not None else None
    offset = e.offset
    if offset and node is not None and getattr(node, "style", None) in ("'", '"'):
        offset += 1
    if offset and node is not None and getattr(node, "style", None) in ("|", ">"):
        offset = 0  # block scalars start on the next line: point at the key
    return mark_error(filename, mark, e.message, offset)
