"""drf-spectacular postprocessing: every operation documents the problem documents
(`application/problem+json`, the `Problem` component) the API answers with for a request it
refuses: 400 invalid, 401 no credentials, 403 not allowed, 404 no such object (operations with
a path parameter), 429 throttled, and whatever else a view documents at 400 or above (409 not
done yet, 422 failed, 503 queue down...): every error answer of the API is a problem document
(problems), whatever schema the view gave it."""
from __future__ import annotations

from http import HTTPStatus

from problems import PROBLEM_CONTENT_TYPE

EVERY_OPERATION = (400, 401, 403, 429)
WITH_PATH_PARAMETER = (404,)
HTTP_METHODS = {"get", "put", "patch", "post", "delete", "head", "options", "trace"}


def document_problems(result: dict, generator, request, public) -> dict:
    problem = {"schema": {"$ref": "#/components/schemas/Problem"}}
    for path, operations in result.get("paths", {}).items():
        codes = EVERY_OPERATION + (WITH_PATH_PARAMETER if "{" in path else ())
        for method, operation in operations.items():
            if method not in HTTP_METHODS:
                continue
            responses = operation.setdefault("responses", {})
            for code in codes:
                responses.setdefault(str(code), {"description": HTTPStatus(code).phrase})
            for code, response in responses.items():
                if code.isdigit() and int(code) >= 400:
                    response["content"] = {PROBLEM_CONTENT_TYPE: problem}
    return result
