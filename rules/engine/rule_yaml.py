"""Rule YAML with marks: safe (no aliases or anchors), bounded (depth, nodes, documents), and
every mapping and list remembers where each key and value was written, so a problem found
later (schema, compiler) is reported at its file:line:col."""
from __future__ import annotations

import yaml

from rules.engine import limits
from rules.engine.errors import RuleError

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader as _Loader


class MarkedDict(dict):
    """A mapping that remembers where each key and value was written."""
    key_nodes: dict
    value_nodes: dict
    node: object


class MarkedList(list):
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
    out = MarkedDict()
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
    out = MarkedList(loader.construct_object(child, deep=True) for child in node.value)
    out.item_nodes, out.node = list(node.value), node
    return out


_MarkedLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_MarkedLoader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)


def unmarked(value):
    """Marked containers -> plain dicts/lists (what the rest of the engine and the API see)."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
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


def documents(text: str, filename: str):
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
        raise mark_error(filename, e.mark, e.message) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = " ".join(p for p in (e.context, e.problem) if p)
        raise mark_error(filename, mark, f"invalid YAML: {problem}") from None
    except yaml.YAMLError as e:
        raise RuleError(filename, 1, 1, f"invalid YAML: {e}") from None


def mark_error(filename: str, mark, message: str, offset: int = 0) -> RuleError:
    if mark is None:
        return RuleError(filename, 1, 1, message)
    return RuleError(filename, mark.line + 1, mark.column + 1 + offset, message)


def source_lines(text: str, docs) -> list[str]:
    lines = text.splitlines(keepends=True)
    starts = [node.start_mark.line for _, node in docs] + [len(lines)]
    return ["".join(lines[starts[i]:starts[i + 1]]).rstrip() + "\n" for i in range(len(docs))]


def node_at(doc, path, want_key: bool = False):
    """The YAML node at a document path (the key's node when want_key), or the closest parent."""
    node, current = getattr(doc, "node", None), doc
    for part in path:
        if isinstance(current, MarkedDict) and part in current:
            node = current.key_nodes[part] if want_key and part is path[-1] else current.value_nodes[part]
            current = current[part]
        elif isinstance(current, MarkedList) and isinstance(part, int) and part < len(current):
            node, current = current.item_nodes[part], current[part]
        else:
            break
    return node
