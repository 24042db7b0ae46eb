"""The published schema says what a client gets when a request is refused: every operation
documents its problem documents (`application/problem+json`), and the query parameters of the
cluster stream and of every list carry the bounds and choices the server checks."""
import pytest

from problems import PROBLEM_CONTENT_TYPE

PROBLEM = {"schema": {"$ref": "#/components/schemas/Problem"}}


@pytest.fixture
def schema(alice_api):
    response = alice_api.get("/api/schema/?format=json")
    assert response.status_code == 200
    return response.json()


def operations(schema):
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            yield path, method, op


def test_every_error_answer_is_a_documented_problem_document(schema):
    for path, method, op in operations(schema):
        codes = {int(c) for c in op["responses"] if c.isdigit()}
        assert {400, 401, 403, 429} <= codes, (method, path)
        if "{" in path:
            assert 404 in codes, (method, path)
        for code, response in op["responses"].items():
            if int(code) >= 400:
                assert response["content"] == {PROBLEM_CONTENT_TYPE: PROBLEM}, (method, path, code)


def test_list_and_stream_parameters_carry_the_servers_bounds(schema):
    params = {p["name"]: p["schema"] for p in schema["paths"]["/api/v1/clusters/"]["get"]["parameters"]}
    assert params["limit"] == {"type": "integer", "minimum": 1, "maximum": 500}
    assert params["offset"]["minimum"] == 0
    assert params["period"] == {"type": "integer", "minimum": 1, "maximum": 90}
    assert params["severity"] == {"type": "array", "items": {"type": "string",
                                                             "enum": ["info", "warning", "error", "critical"]}}
    assert "" in params["sort"]["enum"] and "last_seen" in params["sort"]["enum"]
    assert params["label"]["items"]["pattern"]
    traces = {p["name"]: p["schema"] for p in schema["paths"]["/api/v1/traces/"]["get"]["parameters"]}
    assert traces["limit"]["maximum"] == 500


def test_request_bodies_are_json_but_the_uploads_multipart(schema):
    bodies = {(path, method): set(op["requestBody"]["content"]) for path, method, op in operations(schema)
              if "requestBody" in op}
    assert bodies[("/api/v1/traces/", "post")] == {"multipart/form-data"}
    assert bodies[("/api/v1/destinations/{id}/", "patch")] == {"application/json"}
    assert all(types == {"application/json"} for (path, method), types in bodies.items()
               if (path, method) != ("/api/v1/traces/", "post")), bodies


def test_a_required_text_field_of_a_request_may_not_be_blank(schema):
    components = schema["components"]["schemas"]
    assert components["HeartbeatRequest"]["properties"]["host"]["minLength"] == 1
    assert components["RuleCreateRequest"]["properties"]["yaml"]["minLength"] == 1
    assert "sli" in components["SLORequest"]["properties"]
    assert "step_time" in components[components["SLORequest"]["properties"]["sli"]["$ref"].rsplit("/", 1)[1]]["enum"]
