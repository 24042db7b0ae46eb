"""End to end through a real web server and a real Celery worker: on PostgreSQL + Redis,
and on the embedded default (SQLite + SQLite broker). Uploads the cudagraph_abort
scenario with ?wait= and checks the state machine and the report; unusable files fail
with a message naming them while the worker keeps serving the next upload."""
import random

import pytest

from tests.corpus import corpus
from tests.support.stack import Stack, postgres_database, reachable, stack_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
SCENARIO = ("h200", "cudagraph_abort")


@pytest.fixture(scope="module", params=["postgres+redis", "embedded"])
def stack(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param.replace("+", "-"))
    if request.param == "embedded":
        env = stack_env(tmp, f"sqlite:///{tmp / 'tracedoc.sqlite3'}", f"sqla+sqlite:///{tmp / 'broker.sqlite'}")
        s = Stack(tmp, env).start()
        yield s
        s.stop()
        return
    if not (reachable(5432) and reachable(6379)):
        pytest.skip("PostgreSQL (5432) and Redis (6379) are not running: scripts/ensure-services.sh starts them")
    with postgres_database() as database_url:
        s = Stack(tmp, stack_env(tmp, database_url, "redis://127.0.0.1:6379/0")).start()
        yield s
        s.stop()


@pytest.fixture(scope="module")
def scenario_files(corpus_dir):
    return [(p.name, p.read_bytes()) for p in sorted(corpus(*SCENARIO).iterdir())]


def test_a_trace_goes_through_every_state_to_its_report(stack, scenario_files):
    trace = stack.upload(scenario_files, name="cudagraph abort", labels='{"scenario": "cudagraph_abort"}')
    assert trace["state"] == "done", (trace["error"], stack.logs())
    assert [h["state"] for h in trace["state_history"]] == ["received", "parsing", "parsed", "diagnosing", "done"]
    report = trace["report"]
    assert report == stack.api("get", f"/api/v1/traces/{trace['id']}/report/").json()
    assert {a["path"] for a in report["trace"]["artifacts"]} == {name for name, _ in scenario_files}
    formats = {a["path"]: a["format"] for a in report["trace"]["artifacts"]}
    assert formats["kineto_trace.json.gz"] == "kineto"
    for key in ("findings", "violations", "clusters"):
        assert isinstance(report[key], list)
    ids = {f["id"] for f in report["findings"]}
    for c in report["clusters"]:
        assert {"id", "fingerprint", "root_cause", "title", "severity", "findings", "why_grouped"} <= set(c)
        assert set(c["findings"]) <= ids
    # The diagnosis the corpus README expects (rules are the lead's: adjust with them).
    host_sync = [f for f in report["findings"] if f["root_cause"] == "cuda_graph.host_sync_in_capture"]
    assert host_sync and host_sync[0]["severity"] in ("error", "critical"), report["findings"]
    listed = stack.api("get", "/api/v1/traces/?label=scenario=cudagraph_abort").json()["results"]
    assert [t["id"] for t in listed] == [trace["id"]]
    clusters = stack.api("get", "/api/v1/clusters/").json()["results"]
    assert {c["fingerprint"] for c in clusters} >= {c["fingerprint"] for c in report["clusters"]}


BAD = {
    "empty.json": b"",
    "junk.bin": random.Random(3).randbytes(4096),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_an_unusable_file_fails_naming_it_and_the_worker_carries_on(stack, scenario_files, name):
    failed = stack.upload([(name, BAD[name])], wait=60)
    assert failed["state"] == "failed", stack.logs()
    assert name in failed["error"]
    assert failed["artifacts"][0]["error"].startswith(name)
    problem = stack.api("get", f"/api/v1/traces/{failed['id']}/report/")
    assert problem.status_code == 422 and name in problem.json()["detail"]
    nxt = stack.upload(scenario_files[-1:], wait=120)
    assert nxt["state"] == "done", (nxt["error"], stack.logs())


def test_a_truncated_gzip_beside_a_good_file_is_an_artifact_error(stack, scenario_files):
    kineto = dict(scenario_files)["kineto_trace.json.gz"]
    trace = stack.upload([("kineto_trace.json.gz", kineto), ("cut.json.gz", kineto[: len(kineto) // 2])])
    assert trace["state"] == "done", (trace["error"], stack.logs())
    cut = next(a for a in trace["artifacts"] if a["name"] == "cut.json.gz")
    assert cut["error"].startswith("cut.json.gz")
    reported = next(a for a in trace["report"]["trace"]["artifacts"] if a["path"] == "cut.json.gz")
    assert any("cut.json.gz" in w for w in reported["warnings"])
