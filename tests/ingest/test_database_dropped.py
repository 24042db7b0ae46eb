"""No trace is ever stuck when PostgreSQL drops the worker's connections (a restart, a
failover, `pg_terminate_backend`): a real prefork worker and gunicorn on their own database,
every connection to it terminated mid-parse, again and again. The trace ends `done` exactly
once, with one report and one set of findings; the worker logs that it reconnected."""
import time

import psycopg
import pytest

from tests.support.stack import PG_ADMIN, SLOW_LOG_LINES, Stack, running_stack, slow_log, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]



@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("db-dropped"), pool="prefork") as s:
        yield s


def terminate_connections(database: str) -> int:
    """What a database restart does to its clients: every connection to `database` ended."""
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        rows = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE datname = %s AND pid <> pg_backend_pid()", (database,)).fetchall()
    return len(rows)


def test_connections_dropped_mid_parse_leave_the_trace_done_once(stack: Stack):
    trace_id = stack.upload([("serving.log", slow_log())], wait=0)["id"]
    wait_for(stack, trace_id, lambda t: t["state"] == "parsing" and 0 < t["progress"]["bytes_done"], timeout=120)
    dropped = 0
    for _ in range(3):  # the parser reports progress every 0.5 s: each drop lands mid-parse
        dropped += terminate_connections(stack.database)
        time.sleep(1.0)
    assert dropped >= 3  # the worker's connection at least, each time

    trace = wait_for(stack, trace_id, lambda t: t["state"] in ("done", "failed"), timeout=480)
    assert trace["state"] == "done", (trace["error"], stack.logs())
    states = [h["state"] for h in trace["state_history"]]
    assert states.count("done") == 1 and states[-3:] == ["parsed", "diagnosing", "done"], states
    assert not any(h.get("error") for h in trace["state_history"]), trace["state_history"]
    report = stack.api("get", f"/api/v1/traces/{trace_id}/report/").json()
    assert report["trace"]["artifacts"][0]["events"] == SLOW_LOG_LINES
    assert not report["trace"]["artifacts"][0].get("error")
    findings = stack.api("get", f"/api/v1/traces/{trace_id}/findings/").json()
    listed = findings["results"] if isinstance(findings, dict) else findings
    assert len(listed) == len(report["findings"])  # recorded once
    assert b"database connection lost" in (stack.tmp / "worker.log").read_bytes()
