"""Load and validate rule files: YAML (safe, no aliases, bounded) -> JSON Schema -> compile.

Every problem becomes a RuleError `file:line:col: message` a rule author can act on:

    team.yaml:12:13: condition names selection 'erors' which is not defined under match (defined: errors, benign)

Public API: load_rule_text, load_rule_files, load_rule_dirs, validate_files, check_text, check_files,
Rule, RuleError.
Each step has its module: rules.engine.rule_yaml (YAML with marks), rules.engine.schema_errors (the JSON
Schema), rules.engine.semantic_errors (compiling), rules.engine.rule_files (files on disk),
rules.engine.pack_cache (the builtin pack, cached); warnings that do not refuse a rule: rules.engine.rule_warnings.
"""
from __future__ import annotations

from pathlib import Path

from rules.engine import limits
from rules.engine.errors import RuleError
from rules.engine.pack_cache import cached_pack
from rules.engine.rule import Rule
from rules.engine.rule_files import read_rule_file, rule_files
from rules.engine.rule_yaml import MarkedDict, documents, mark_error, source_lines
from rules.engine.schema_errors import faulty_keys, schema_errors, type_name
from rules.engine.semantic_errors import capture_errors, compile_errors

BUILTIN_DIR = Path(__file__).resolve().parents[1] / "builtin"  # rules/builtin, where rule authors look
# keys no compiling reads: a rule whose only schema faults are here is compiled as well, with
# these stand-ins for the ones missing
METADATA_KEYS = frozenset({"id", "version", "title", "status", "severity", "owner", "tags", "root_cause", "slo",
                           "description", "references", "tests", "causes", "suppresses"})
METADATA_STANDINS = {"id": "rule.being-checked", "version": 1, "title": "", "status": "experimental",
                     "severity": "info"}


def check_text(text: str, filename: str = "<text>") -> tuple[list[Rule], list[RuleError]]:
    """Every rule of a file and every problem in it (rules with problems are left out)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.MAX_RULE_FILE_BYTES:
        return [], [RuleError(filename, 1, 1, f"rule file is {size:,} bytes (limit {limits.MAX_RULE_FILE_BYTES:,})")]
    try:
        docs = [(d, n) for d, n in documents(text, filename)]
    except RuleError as e:
        return [], [e]
    rules: list[Rule] = []
    errors: list[RuleError] = []
    seen: dict[str, int] = {}  # rule id: its line
    for (doc, node), source in zip(docs, source_lines(text, docs)):
        if doc is None:
            continue
        if not isinstance(doc, MarkedDict):  # the loader makes every mapping one
            errors.append(mark_error(filename, node.start_mark, "a rule is a mapping of keys (id, title, match, ...), "
                                                                f"not {type_name(doc)}"))
            continue
        problems = schema_errors(doc, filename)
        if problems and not faulty_keys(doc) - METADATA_KEYS:
            # the schema's faults are all in what is not compiled (severity, status, ...): the
            # match, condition and templates are checked too, so one run lists every problem
            rule = Rule.from_data({**METADATA_STANDINS, **doc}, filename, node.start_mark.line + 1, source)
            problems = sorted(problems + compile_errors(rule, doc, filename) + capture_errors(doc, filename),
                              key=lambda e: (e.line, e.col))
        elif not problems:
            rule = Rule.from_data(doc, filename, node.start_mark.line + 1, source)
            problems = compile_errors(rule, doc, filename) + capture_errors(doc, filename)
            if not problems and rule.id in seen:
                problems = [mark_error(filename, doc.value_nodes["id"].start_mark,
                                       f"rule id {rule.id!r} is already used at line {seen[rule.id]}")]
            if not problems:
                seen[rule.id] = rule.line
                rules.append(rule)
        errors.extend(problems)
    return rules, errors


def load_rule_text(text: str, filename: str = "<text>") -> list[Rule]:
    """The rules of one file's text; raises the first RuleError."""
    rules, errors = check_text(text, filename)
    if errors:
        raise errors[0]
    return rules


def check_files(paths) -> tuple[list[Rule], list[RuleError]]:
    """The valid rules of files (or folders) and every problem (ids must be unique across them)."""
    rules: list[Rule] = []
    errors: list[RuleError] = []
    where: dict[str, str] = {}  # rule id: file:line
    for path in rule_files(paths):
        try:
            file_rules, file_errors = check_text(read_rule_file(path), str(path))
        except RuleError as e:
            errors.append(e)
            continue
        errors.extend(file_errors)
        for rule in file_rules:
            if rule.id in where:
                errors.append(RuleError(rule.file, rule.line, 1, f"rule id {rule.id!r} is already defined in {where[rule.id]}"))
                continue
            where[rule.id] = f"{rule.file}:{rule.line}"
            rules.append(rule)
    return rules, errors


def load_rule_files(paths) -> list[Rule]:
    """Rules of files (or folders); raises the first RuleError. Ids must be unique."""
    rules, errors = check_files(paths)
    if errors:
        raise errors[0]
    return rules


def validate_files(paths) -> list[RuleError]:
    return check_files(paths)[1]


def load_rule_dirs(dirs: list | None = None) -> list[Rule]:
    """The builtin pack, plus each folder's rules on top: a rule whose id is already loaded
    replaces it (a team overrides a builtin rule by reusing its id)."""
    by_id = {r.id: r for r in _builtin_rules()}
    for d in dirs or []:
        if not Path(d).is_dir():
            raise FileNotFoundError(f"rules folder not found: {d}")
        for rule in load_rule_files([d]):
            by_id[rule.id] = rule
    return list(by_id.values())


def _builtin_rules() -> list[Rule]:
    """load_rule_files of the builtin folder, through the pack cache (rules.engine.pack_cache)."""
    if not BUILTIN_DIR.is_dir():
        return []
    return cached_pack(rule_files([BUILTIN_DIR]), load_rule_files)
