"""The whole service on S3-compatible object storage: the real web app (gunicorn) and a real
Celery worker (prefork, as deployed) on PostgreSQL + Redis, with TRACEDOC_STORAGE=s3://... on an
S3 API emulator (moto's server mode, started by this test on a free port: tests/support/s3_emulator.py).
A corpus upload is stored in the bucket under its digests, parsed by the worker from there, its
Parquet files put back, diagnosed from them; the report is the one the same upload gets on the
local-folder backend, and nothing is left on the worker's disk."""
import hashlib
from contextlib import contextmanager

import pytest

from tests.corpus import corpus
from tests.support.s3_emulator import CREDENTIALS, s3_emulator
from tests.support.stack import Stack, part_counts, postgres_database, reachable, stack_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
SCENARIO = ("h200", "cudagraph_abort")
PREFIX = "fleet/prod"
# the S3 stack fans out a trace of 64 KiB or more (the scenario above stays whole), logs in 32 KiB ranges
FANOUT = {"TRACEDOC_FANOUT_BYTES": str(64 << 10), "TRACEDOC_FANOUT_PART_BYTES": str(32 << 10),
          "TRACEDOC_FANOUT_WARMUP_BYTES": str(256 << 10)}
BIG_LOG = ("public", "logs", "megatron_deepspeed_2node_16gpu_superbench.log")  # 121 KB


@pytest.fixture(scope="module")
def scenario_files(corpus_dir):
    return [(p.name, p.read_bytes()) for p in sorted(corpus(*SCENARIO).iterdir())]


@pytest.fixture(scope="module")
def emulator():
    with s3_emulator() as running:
        yield running


@contextmanager
def _stack(tmp, extra: dict):
    if not (reachable(5432) and reachable(6379)):
        pytest.skip("PostgreSQL (5432) and Redis (6379) are not running: scripts/ensure-services.sh starts them")
    with postgres_database() as database_url:
        env = stack_env(tmp, database_url, "redis://127.0.0.1:6379/0")
        env.update(extra)
        s = Stack(tmp, env, pool="prefork").start()
        try:
            yield s
        finally:
            s.stop()


@pytest.fixture(scope="module")
def local_stack(tmp_path_factory):
    with _stack(tmp_path_factory.mktemp("local"), {}) as s:
        yield s


@pytest.fixture(scope="module")
def s3_stack(tmp_path_factory, emulator):
    bucket = emulator.new_bucket()
    s3 = {"TRACEDOC_STORAGE": f"s3://{bucket}/{PREFIX}", "TRACEDOC_S3_ENDPOINT_URL": emulator.endpoint_url,
          **CREDENTIALS, **FANOUT}
    with _stack(tmp_path_factory.mktemp("s3"), s3) as s:
        s.bucket = bucket
        yield s


def _lines(stack, trace_id: int) -> dict:
    response = stack.api("get", f"/api/v1/traces/{trace_id}/lines/",
                         params={"artifact": "kineto_trace.json.gz", "line": 3, "context": 2})
    assert response.status_code == 200, response.text
    assert len(response.json()["lines"]) == 5  # gunzipped as it is fetched
    return response.json()


def test_an_upload_on_s3_gives_the_local_backends_report(local_stack, s3_stack, emulator, scenario_files):
    on_disk = local_stack.upload(scenario_files, name="cudagraph abort")
    on_s3 = s3_stack.upload(scenario_files, name="cudagraph abort")
    assert on_disk["state"] == "done", (on_disk["error"], local_stack.logs())
    assert on_s3["state"] == "done", (on_s3["error"], s3_stack.logs())
    assert on_s3["report"]["findings"], "the scenario has findings: an empty report would prove nothing"
    assert on_s3["report"] == on_disk["report"]
    assert _lines(s3_stack, on_s3["id"]) == _lines(local_stack, on_disk["id"])

    # in the bucket: each upload under its digest, and the trace's Parquet files
    stored = emulator.files(f"{s3_stack.bucket}/{PREFIX}")
    root = f"{s3_stack.bucket}/{PREFIX}"
    for name, data in scenario_files:
        digest = hashlib.sha256(data).hexdigest()
        assert stored.pop(f"{root}/{digest[:2]}/{digest}") == len(data), name
    parquet = {key for key in stored if key.startswith(f"{root}/parquet/{on_s3['id']}/")}
    parsed = [a for a in on_s3["artifacts"] if not a["error"]]  # errors.log is empty: no events file
    assert len(parquet) == len(parsed) > 0 and set(stored) == parquet  # no temporary upload left
    # ... and nothing on the web's or the worker's disk: no local store, no download or Parquet left behind
    var = s3_stack.tmp / "var"
    assert not (s3_stack.tmp / "storage").exists()
    assert [p for p in var.rglob("*") if p.is_file() and "scratch" in p.parts] == []


def test_the_same_upload_again_is_stored_once(s3_stack, emulator, scenario_files):
    before = emulator.files(f"{s3_stack.bucket}/{PREFIX}")
    again = s3_stack.upload(scenario_files[-1:], name="again")  # the Kineto trace
    assert again["state"] == "done", (again["error"], s3_stack.logs())
    after = emulator.files(f"{s3_stack.bucket}/{PREFIX}")
    new = set(after) - set(before)
    assert new and all(f"/parquet/{again['id']}/" in key for key in new)  # its Parquet file, no second blob


def test_a_trace_fanned_out_over_s3_gives_the_single_parse_report(local_stack, s3_stack, emulator, corpus_dir):
    """Parts parsed from the bucket, their Parquet files put to it and merged from it."""
    log = corpus(*BIG_LOG)
    files = [(log.name, log.read_bytes())]
    whole = local_stack.upload(files, name="big log")
    parted = s3_stack.upload(files, name="big log")
    assert parted["state"] == "done", (parted["error"], s3_stack.logs())
    assert part_counts(s3_stack, parted["id"]).get("range", 0) >= 3  # it was cut in byte ranges
    assert parted["report"] == whole["report"] and parted["report"]["trace"]["events"] > 1000
    keys = [k for k in emulator.files(f"{s3_stack.bucket}/{PREFIX}") if f"/parquet/{parted['id']}/" in k]
    assert len(keys) == 1 and "/parts/" not in keys[0]  # the merged file; the parts' files are gone
