"""Check a real API answer against the OpenAPI schema the server publishes (`/api/schema/`).

OpenAPI 3.0 schemas are JSON Schema but for `nullable`; that one keyword is rewritten, then
jsonschema validates with the schema's own components."""
from __future__ import annotations

import functools
from typing import Any

import jsonschema
import yaml


@functools.cache
def _published(schema_text: str) -> dict:
    return json_schema_of(yaml.safe_load(schema_text))


def published_schema(client) -> dict:
    """The schema as served, with `nullable` rewritten (parsed once per distinct text)."""
    response = client.get("/api/schema/")
    assert response.status_code == 200, response.content
    return _published(response.content.decode())


def json_schema_of(node: Any) -> Any:
    """`nullable: true` -> JSON Schema's null type (OpenAPI 3.0 -> JSON Schema)."""
    if isinstance(node, list):
        return [json_schema_of(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: json_schema_of(v) for k, v in node.items() if k != "nullable"}
    if not node.get("nullable"):
        return out
    if "type" in out and "enum" not in out:
        return {**out, "type": [out["type"], "null"]}
    return {"anyOf": [out, {"type": "null"}]}


def response_schema(schema: dict, method: str, path: str, status: int,
                    media_type: str = "application/json") -> dict:
    operation = schema["paths"][path][method]
    content = operation["responses"][str(status)]["content"]
    assert media_type in content, f"{method} {path} {status}: the schema gives {sorted(content)}"
    return {**content[media_type]["schema"], "components": schema["components"]}


def assert_matches_schema(client, method: str, path: str, status: int, body: Any,
                          media_type: str = "application/json") -> None:
    jsonschema.Draft202012Validator(response_schema(published_schema(client), method, path, status,
                                                    media_type)).validate(body)
