"""What the rule editor offers while a rule is typed: top-level and nested keys from
rules/schema.json, the selection modifiers (rules.engine.modifiers.MODIFIERS), the event columns
and the features a selection can read (`from: <feature>`), each with a line of help for
completion and hover. One source of truth: nothing here is written by hand twice."""
from __future__ import annotations

import inspect
import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from ingest.engine.events import COLUMNS
from rules.engine.features import list_features
from rules.engine.modifiers import MODIFIERS

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schema.json"  # rules/schema.json


@dataclass(frozen=True)
class Hint:
    name: str
    doc: str
    values: tuple[str, ...] = ()   # the allowed values of an enum key


def _summary(name: str, spec: dict, required: set[str]) -> str:
    """A key's help: its description, else what the schema says it takes."""
    parts = [spec["description"]] if spec.get("description") else []
    if "enum" in spec:
        parts.append("one of " + " | ".join(map(str, spec["enum"])))
    elif "type" in spec:
        parts.append(f"{spec['type']}")
    elif "$ref" in spec:
        parts.append(spec["$ref"].rsplit("/", 1)[-1])
    if name in required:
        parts.append("required")
    return "; ".join(parts)


def _keys(schema: dict) -> list[Hint]:
    required = set(schema.get("required", ()))
    return [Hint(name, _summary(name, spec, required), tuple(map(str, spec.get("enum", ()))))
            for name, spec in schema.get("properties", {}).items()]


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


@lru_cache(maxsize=1)
def editor_hints() -> dict:
    """{"keys", "nested": {parent: keys}, "modifiers", "columns", "features"} as JSON-ready lists."""
    schema = json.loads(SCHEMA_PATH.read_text())
    nested = {name: [asdict(h) for h in _keys(spec)]
              for name, spec in schema["properties"].items() if spec.get("properties")}
    return {
        "keys": [asdict(h) for h in _keys(schema)],
        "nested": nested,
        "modifiers": [asdict(Hint(name, _first_line(inspect.getdoc(m)))) for name, m in MODIFIERS.items()],
        "columns": [asdict(Hint(c, "event column")) for c in COLUMNS],
        "features": [asdict(Hint(f["name"], _first_line(f["doc"]))) for f in list_features()],
    }
