"""drf-spectacular postprocessing: a request body is documented as JSON wherever the operation
takes JSON. DRF's default parsers also read form bodies, where a blank optional field means
"not given" (DRF's HTML-input rule), so a blank `team` or `kind` in a form is accepted where
the JSON schema says it may not be blank: the contract clients and generated code follow is
JSON. An operation that takes only forms (the upload's multipart `files`) keeps them."""
from __future__ import annotations

JSON = "application/json"
FORMS = ("multipart/form-data", "application/x-www-form-urlencoded")


def json_bodies(result: dict, generator, request, public) -> dict:
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            content = operation.get("requestBody", {}).get("content") if isinstance(operation, dict) else None
            if content and JSON in content:
                for form in FORMS:
                    content.pop(form, None)
    return result
