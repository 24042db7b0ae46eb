"""Query parameters a client controls are refused with a 400 naming the parameter, never a 500
(issue 30, item 8): a timeline range past the 64-bit range, a NUL byte in the traces list's
`state` or `label` (PostgreSQL refuses NUL in text)."""
import pytest

from tests.support.diagnosed_traces import diagnosed


def invalid(response) -> set[str]:
    """The parameters a problem document names as invalid."""
    return {p["name"] for p in response.json()["invalid_params"]}


@pytest.fixture
def graph_trace(infra, alice, no_worker, corpus_dir):
    return diagnosed(infra, alice, "cudagraph_abort")


@pytest.mark.parametrize("params", [{"start_ns": str(2**63)}, {"end_ns": str(-(2**63) - 1)},
                                    {"start_ns": "1", "end_ns": "9" * 40}])
def test_a_timeline_range_past_64_bits_is_a_400(alice_api, graph_trace, params):
    for url in ("/api/v1/traces/{}/timeline/", "/api/v1/traces/{}/timeline/export/"):
        response = alice_api.get(url.format(graph_trace.pk), params)
        assert response.status_code == 400, response.content[:300]
        assert set(params) & invalid(response)


@pytest.mark.django_db
@pytest.mark.parametrize("params,field", [({"state": "done\x00"}, "state"), ({"state": "finished"}, "state"),
                                          ({"label": "team=a\x00b"}, "label")])
def test_a_bad_traces_list_filter_is_a_400(alice_api, params, field):
    response = alice_api.get("/api/v1/traces/", params)
    assert response.status_code == 400 and field in invalid(response)


@pytest.mark.django_db
def test_a_known_state_still_filters(alice_api):
    assert alice_api.get("/api/v1/traces/", {"state": "done"}).status_code == 200
