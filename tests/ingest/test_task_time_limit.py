"""A parse past the worker's time limit fails its trace with a message that says so and what to
do (not as a parser bug), on a real prefork worker (time limits are signals in the pool child)
with PostgreSQL and Redis."""
import pytest

from tests.support.stack import running_stack, slow_log, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("time-limit"), pool="prefork", TRACEDOC_TASK_SOFT_TIME_LIMIT="1",
                       TRACEDOC_TASK_TIME_LIMIT="60") as s:
        yield s


def test_a_parse_past_the_time_limit_fails_with_the_reason(stack):
    trace_id = stack.upload([("serving.log", slow_log())], wait=0)["id"]
    trace = wait_for(stack, trace_id, lambda t: t["state"] in ("done", "failed"), timeout=300)
    assert trace["state"] == "failed", trace
    assert "longer than the worker's time limit (TRACEDOC_TASK_SOFT_TIME_LIMIT)" in trace["error"]
    assert "raise the limit" in trace["error"]
    assert "internal error" not in trace["error"] and "bug" not in trace["error"]
    assert 0 < trace["progress"]["bytes_done"] < trace["progress"]["bytes_total"]  # stopped partway
    states = [h["state"] for h in trace["state_history"]]
    assert states.count("failed") == 1 and "parsed" not in states, states
    report = stack.api("get", f"/api/v1/traces/{trace_id}/report/")
    assert report.status_code == 422 and "time limit" in report.json()["detail"]
