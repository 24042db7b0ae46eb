"""Load and validate rule files: YAML (safe, no aliases, bounded) -> JSON Schema -> compile.

Every problem becomes a RuleError `file:line:col: message` a rule author can act on:

    team.yaml:12:13: condition names selection 'erors' which is not defined under match (defined: errors, benign)

Public API: load_rule_text, load_rule_files, load_rule_dirs, validate_files, Rule, RuleError.
"""
from __future__ import annotations

import difflib
import functools
import hashlib
import json
import marshal
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rules import limits
from rules.capture_plans import CapturePlan, CapturePlanError, parse_plan
from rules.compiler import CompileError, compile_rule, compile_selection
from rules.errors import RuleError

BUILTIN_DIR = Path(__file__).parent / "builtin"
SCHEMA_PATH = Path(__file__).parent / "schema.json"
RULE_SUFFIXES = (".yaml", ".yml")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class Rule:
    """A validated rule. `data` is the document as loaded; `source` its YAML text."""
    id: str
    version: int
    title: str
    status: str
    severity: str
    data: dict
    file: str = "<text>"
    line: int = 1
    source: str = ""
    owner: str = ""
    tags: list = field(default_factory=list)
    root_cause: str = ""
    slo: str | None = None
    description: str = ""
    explain: str = ""
    recommend: list = field(default_factory=list)
    references: list = field(default_factory=list)
    fingerprint: list = field(default_factory=list)
    causes: list = field(default_factory=list)
    suppresses: list = field(default_factory=list)
    tests: dict = field(default_factory=dict)

    @classmethod
    def from_data(cls, data: dict, file: str, line: int, source: str) -> "Rule":
        keys = ("owner", "tags", "root_cause", "slo", "description", "explain", "recommend", "references",
                "fingerprint", "causes", "suppresses", "tests")
        return cls(id=data["id"], version=data["version"], title=data["title"], status=data["status"],
                   severity=data["severity"], data=_unmarked(data), file=str(file), line=line, source=source,
                   **{k: _unmarked(data[k]) for k in keys if k in data})

    def to_dict(self) -> dict:
        return {**self.data, "file": self.file, "line": self.line}

    @property
    def capture_plan(self) -> CapturePlan | None:
        """The capture that would decide this rule's findings (checked when the rule was loaded)."""
        return parse_plan(self.data["capture"]) if "capture" in self.data else None


# ---------------------------------------------------------------- YAML with marks

class _MarkedDict(dict):
    """A mapping that remembers where each key and value was written."""
    key_nodes: dict
    value_nodes: dict
    node: object


class _MarkedList(list):
    item_nodes: list
    node: object


class _YamlProblem(Exception):
    def __init__(self, mark, message: str):
        super().__init__(message)
        self.mark, self.message = mark, message


class _MarkedLoader(_Loader):
    pass


def _construct_map(loader, node):
    loader.flatten_mapping(node)
    out = _MarkedDict()
    out.key_nodes, out.value_nodes, out.node = {}, {}, node
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise _YamlProblem(key_node.start_mark, "mapping keys must be plain text")
        if key in out:
            first = out.key_nodes[key].start_mark
            raise _YamlProblem(key_node.start_mark, f"duplicate key {key!r} (first defined at line {first.line + 1})")
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_nodes[key], out.value_nodes[key] = key_node, value_node
    return out


def _construct_seq(loader, node):
    out = _MarkedList(loader.construct_object(child, deep=True) for child in node.value)
    out.item_nodes, out.node = list(node.value), node
    return out


_MarkedLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_MarkedLoader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)


def _unmarked(value):
    """Marked containers -> plain dicts/lists (what the rest of the engine and the API see)."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def _check_events(text: str) -> None:
    """One cheap pass over the YAML events before anything is built: refuse aliases and
    anchors (billion laughs), deep nesting and huge node counts, with the position."""
    depth = nodes = docs = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.AliasEvent):
            raise _YamlProblem(event.start_mark, f"YAML aliases (*{event.anchor}) are not allowed in rules; "
                                                 "write the value out")
        if getattr(event, "anchor", None):
            raise _YamlProblem(event.start_mark, f"YAML anchors (&{event.anchor}) are not allowed in rules")
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > limits.MAX_YAML_DEPTH:
                raise _YamlProblem(event.start_mark, f"nesting deeper than {limits.MAX_YAML_DEPTH} levels")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif isinstance(event, yaml.DocumentStartEvent):
            docs += 1
            if docs > limits.MAX_DOCUMENTS_PER_FILE:
                raise _YamlProblem(event.start_mark, f"more than {limits.MAX_DOCUMENTS_PER_FILE} rules in one file")
        if isinstance(event, yaml.NodeEvent):
            nodes += 1
            if nodes > limits.MAX_YAML_NODES:
                raise _YamlProblem(event.start_mark, f"more than {limits.MAX_YAML_NODES} YAML nodes in one file")


def _documents(text: str, filename: str):
    """[(data, node)] per YAML document; raises RuleError on unsafe or broken YAML."""
    try:
        _check_events(text)
        loader = _MarkedLoader(text)
        try:
            docs = []
            while loader.check_node():
                node = loader.get_node()
                docs.append((loader.construct_document(node), node))
            return docs
        finally:
            loader.dispose()
    except _YamlProblem as e:
        raise _error(filename, e.mark, e.message) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = " ".join(p for p in (e.context, e.problem) if p)
        raise _error(filename, mark, f"invalid YAML: {problem}") from None
    except yaml.YAMLError as e:
        raise RuleError(filename, 1, 1, f"invalid YAML: {e}") from None


def _error(filename: str, mark, message: str, offset: int = 0) -> RuleError:
    if mark is None:
        return RuleError(filename, 1, 1, message)
    return RuleError(filename, mark.line + 1, mark.column + 1 + offset, message)


# ---------------------------------------------------------------- schema

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


def _node_at(doc, path, want_key: bool = False):
    """The YAML node at a document path (the key's node when want_key), or the closest parent."""
    node, current = getattr(doc, "node", None), doc
    for part in path:
        if isinstance(current, _MarkedDict) and part in current:
            node = current.key_nodes[part] if want_key and part is path[-1] else current.value_nodes[part]
            current = current[part]
        elif isinstance(current, _MarkedList) and isinstance(part, int) and part < len(current):
            node, current = current.item_nodes[part], current[part]
        else:
            break
    return node


def _schema_errors(doc, filename: str) -> list[RuleError]:
    best_match = _jsonschema().exceptions.best_match
    out = []
    for err in sorted(_validator().iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        if err.validator in ("oneOf", "anyOf") and err.context:
            err = best_match(err.context)
        out.extend(_explain_schema_error(err, doc, filename))
    return out


def _explain_schema_error(err, doc, filename: str) -> list[RuleError]:
    path = list(err.absolute_path)
    where = _where(path)
    node = _node_at(doc, path)
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
            knode = _node_at(doc, path + [key], want_key=True)
            out.append(_error(filename, knode.start_mark if knode else mark,
                              f"unknown key {key!r} in {where}{hint}"))
        return out
    if kind == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        return [_error(filename, mark, f"{where} is missing the required key {missing!r}")]
    if kind == "enum":
        return [_error(filename, mark, f"{where}: {err.instance!r} is not one of {', '.join(map(str, err.validator_value))}")]
    if kind == "type":
        wanted = err.validator_value if isinstance(err.validator_value, str) else " or ".join(err.validator_value)
        return [_error(filename, mark, f"{where} must be {_article(wanted)}, not {_type_name(err.instance)}")]
    if kind == "pattern":
        if "propertyNames" in err.schema_path:
            return [_error(filename, mark, f"{err.instance!r} in {where} is not a valid name "
                                           + ("(selection names: letters, digits, _)" if path == ["match"]
                                              else "(write field|modifier, e.g. name|contains or attrs.key|gt)"))]
        hint = _PATTERN_HINTS.get(tuple(path[:1]), f"text matching {err.validator_value}")
        return [_error(filename, mark, f"{where}: {err.instance!r} is not {hint}")]
    if kind == "not" and path == []:
        node = _node_at(doc, ["sequence"], want_key=True)
        return [_error(filename, node.start_mark, "use either aggregate or sequence, not both")]
    message = err.message if len(err.message) < 200 else err.message[:200] + "…"
    return [_error(filename, mark, f"{where}: {message}")]


def _article(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + {"object": "mapping", "array": "list"}.get(word, word)


def _type_name(value) -> str:
    for kind, name in ((dict, "a mapping"), (list, "a list"), (str, "text"), (bool, "true/false"),
                       ((int, float), "a number"), (type(None), "empty")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


# ---------------------------------------------------------------- semantic checks

def _compile_errors(rule: Rule, doc, filename: str) -> list[RuleError]:
    """Every selection's error first (each compiles on its own, so an editor can show them
    all at once), then, when they all compile, the rule's first whole-rule error."""
    errors = []
    for name, spec in (rule.data.get("match") or {}).items():
        try:
            compile_selection(name, spec, ("match", name))
        except CompileError as e:
            errors.append(_compile_error(e, doc, filename))
    if errors:
        return errors
    try:
        compile_rule(rule)
    except CompileError as e:
        return [_compile_error(e, doc, filename)]
    return []


def _capture_errors(doc, filename: str) -> list[RuleError]:
    if "capture" not in doc:
        return []
    try:
        parse_plan(_unmarked(doc["capture"]))
    except CapturePlanError as e:
        return [_error(filename, doc.value_nodes["capture"].start_mark, str(e))]
    return []


def _compile_error(e, doc, filename: str) -> RuleError:
    node = _node_at(doc, list(e.path), want_key=e.path[:1] == ("match",) and isinstance(e.path[-1], str))
    mark = node.start_mark if node is not None else None
    offset = e.offset
    if offset and node is not None and getattr(node, "style", None) in ("'", '"'):
        offset += 1
    if offset and node is not None and getattr(node, "style", None) in ("|", ">"):
        offset = 0  # block scalars start on the next line: point at the key
    return _error(filename, mark, e.message, offset)


def _source_lines(text: str, docs) -> list[str]:
    lines = text.splitlines(keepends=True)
    starts = [node.start_mark.line for _, node in docs] + [len(lines)]
    return ["".join(lines[starts[i]:starts[i + 1]]).rstrip() + "\n" for i in range(len(docs))]


def check_text(text: str, filename: str = "<text>") -> tuple[list[Rule], list[RuleError]]:
    """Every rule of a file and every problem in it (rules with problems are left out)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.MAX_RULE_FILE_BYTES:
        return [], [RuleError(filename, 1, 1, f"rule file is {size:,} bytes (limit {limits.MAX_RULE_FILE_BYTES:,})")]
    try:
        docs = [(d, n) for d, n in _documents(text, filename)]
    except RuleError as e:
        return [], [e]
    rules, errors, seen = [], [], {}
    for (doc, node), source in zip(docs, _source_lines(text, docs)):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            errors.append(_error(filename, node.start_mark, "a rule is a mapping of keys (id, title, match, ...), "
                                                            f"not {_type_name(doc)}"))
            continue
        problems = _schema_errors(doc, filename)
        if not problems:
            rule = Rule.from_data(doc, filename, node.start_mark.line + 1, source)
            problems = _compile_errors(rule, doc, filename) + _capture_errors(doc, filename)
            if not problems and rule.id in seen:
                problems = [_error(filename, doc.value_nodes["id"].start_mark,
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


def _read(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(limits.MAX_RULE_FILE_BYTES + 1)
    except OSError as e:
        raise RuleError(str(path), 1, 1, f"cannot read rule file: {e.strerror or e}") from None
    if len(data) > limits.MAX_RULE_FILE_BYTES:
        raise RuleError(str(path), 1, 1, f"rule file is larger than {limits.MAX_RULE_FILE_BYTES:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RuleError(str(path), 1, 1, f"rule file is not UTF-8 text (byte {e.start})") from None


def rule_files(paths) -> list[Path]:
    """Files as given, folders expanded to their *.yaml / *.yml files (sorted)."""
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(f for f in p.iterdir() if f.suffix in RULE_SUFFIXES and f.is_file()))
        else:
            out.append(p)
    return out


def _check_files(paths) -> tuple[list[Rule], list[RuleError]]:
    rules, errors, where = [], [], {}
    for path in rule_files(paths):
        try:
            file_rules, file_errors = check_text(_read(path), str(path))
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
    rules, errors = _check_files(paths)
    if errors:
        raise errors[0]
    return rules


def validate_files(paths) -> list[RuleError]:
    return _check_files(paths)[1]


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


# ---------------------------------------------------------------- the builtin pack, cached

PACK_CACHE_VERSION = 1
_RULES_CODE = Path(__file__).parent  # the checks themselves: loader, schema, compiler, features


def _builtin_rules() -> list[Rule]:
    """load_rule_files of the builtin folder, from a cache when nothing it depends on changed.

    Checking the pack (YAML, JSON Schema, compiling every rule) costs about as much as the
    rest of a small diagnosis; a CLI run repeats it each time. The cache holds the checked
    rules' data (marshal: plain values only, like a .pyc) under a key over every rule file's
    bytes and every file of the rules package, so an edited rule, schema or feature is
    checked again. Nothing is cached when the pack has errors (they are raised each time)."""
    if not BUILTIN_DIR.is_dir():
        return []
    files = rule_files([BUILTIN_DIR])
    cache = _pack_cache_path()
    key = _pack_key(files) if cache is not None else b""
    cached = _read_pack(cache, key) if cache is not None else None
    if cached is not None:
        return cached
    rules = load_rule_files(files)
    if cache is not None:
        _write_pack(cache, key, rules)
    return rules


def _pack_cache_path() -> Path | None:
    """TRACEDOC_CACHE (a folder; empty: no cache), else the user's cache folder."""
    where = os.environ.get("TRACEDOC_CACHE")
    if where is None:
        where = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tracedoc")
    return Path(where) / "builtin-rules.marshal" if where else None


def _pack_key(files: list[Path]) -> bytes:
    h = hashlib.sha256(f"{PACK_CACHE_VERSION} {sys.version}".encode())
    code = sorted(p for p in _RULES_CODE.rglob("*") if p.suffix in (".py", ".json") and p.is_file())
    for path in list(files) + code:
        try:
            data = path.read_bytes()
        except OSError:
            return b""  # unreadable: no key, no cache
        h.update(f"\0{path}\0{len(data)}\0".encode())
        h.update(data)
    return h.digest()


def _read_pack(cache: Path, key: bytes) -> list[Rule] | None:
    if not key:
        return None
    try:
        stored_key, entries = marshal.loads(cache.read_bytes())
        if stored_key != key:
            return None
        return [Rule.from_data(data, file, line, source) for data, file, line, source in entries]
    except (OSError, EOFError, ValueError, TypeError, KeyError):
        return None


def _write_pack(cache: Path, key: bytes, rules: list[Rule]) -> None:
    if not key:
        return
    try:
        payload = marshal.dumps((key, [(r.data, r.file, r.line, r.source) for r in rules]))
        cache.parent.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError):  # data marshal cannot hold, or a read-only home: just no cache
        return
    tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(payload)
        os.replace(tmp, cache)  # readers see the old file or the new one, never half of one
    except OSError:
        tmp.unlink(missing_ok=True)
