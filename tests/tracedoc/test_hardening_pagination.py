"""Every list endpoint validates ?limit and ?offset: a bad value is a 400 naming it, never a 500."""
import pytest

from tracedoc.pagination import MAX_LIMIT, MAX_OFFSET

LISTS = ["/api/v1/traces/", "/api/v1/rules/", "/api/v1/clusters/"]
BAD = [
    ({"limit": "99999999999999999999"}, "limit"),
    ({"limit": str(MAX_LIMIT + 1)}, "limit"),
    ({"limit": "-1"}, "limit"),
    ({"limit": "0"}, "limit"),
    ({"limit": "ten"}, "limit"),
    ({"offset": "99999999999999999999"}, "offset"),
    ({"offset": str(MAX_OFFSET + 1)}, "offset"),
    ({"offset": "-5"}, "offset"),
    ({"offset": "1e3"}, "offset"),
]


@pytest.mark.parametrize("url", LISTS)
@pytest.mark.parametrize("params,name", BAD)
def test_a_bad_page_parameter_is_a_400_naming_it(alice_api, url, params, name):
    response = alice_api.get(url, params)
    assert response.status_code == 400, response.content[:300]
    assert name in {p["name"] for p in response.json()["invalid_params"]}


@pytest.mark.parametrize("url", LISTS)
def test_the_largest_page_and_a_far_offset_are_served(alice_api, url):
    response = alice_api.get(url, {"limit": MAX_LIMIT, "offset": MAX_OFFSET})
    assert response.status_code == 200
    assert response.json()["results"] == []
