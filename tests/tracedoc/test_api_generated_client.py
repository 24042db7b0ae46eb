"""A Python client generated from the published OpenAPI schema (openapi-python-client, in the
test run) uploads a corpus capture to a live server and reads the diagnosis as typed models:
the schema is what clients get, so `report`, `labels` and `state_history` must not be strings."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from problems import PROBLEM_TYPE_BASE
from tests.corpus import corpus

pytestmark = pytest.mark.timeout(300)
GENERATOR = Path(sys.executable).parent / "openapi-python-client"


@pytest.fixture
def generated_client(alice_api, tmp_path):
    if not GENERATOR.exists():
        pytest.skip("openapi-python-client is not installed (the `test` extra)")
    schema = tmp_path / "openapi.json"
    schema.write_text(json.dumps(alice_api.get("/api/schema/?format=json").json()))
    env = {**os.environ, "PATH": f"{GENERATOR.parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # its ruff hook
    done = subprocess.run([str(GENERATOR), "generate", "--path", str(schema), "--output-path",
                           str(tmp_path / "tracedoc_generated"), "--meta", "none"],
                          capture_output=True, text=True, timeout=240, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module("tracedoc_generated")
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.split(".")[0] == "tracedoc_generated"]:
            del sys.modules[name]


def test_a_generated_client_uploads_and_reads_a_typed_report(generated_client, live_tracedoc, corpus_dir):
    gen = generated_client
    create = importlib.import_module("tracedoc_generated.api.v1.v1_traces_create")
    read_report = importlib.import_module("tracedoc_generated.api.v1.v1_traces_report_retrieve")
    models = importlib.import_module("tracedoc_generated.models")
    from tracedoc_generated.types import File

    client = gen.AuthenticatedClient(base_url=live_tracedoc.url, token=live_tracedoc.token, prefix="Token",
                                     timeout=__import__("httpx").Timeout(200.0))
    paths = sorted(corpus("h200", "cudagraph_abort").iterdir())
    handles = [p.open("rb") for p in paths]
    try:
        body = models.TraceUploadRequest(files=[File(payload=h, file_name=p.name) for h, p in zip(handles, paths)],
                                  labels="branch=main,ci=true")
        trace = create.sync(client=client, body=body, wait=120)
    finally:
        for h in handles:
            h.close()
    assert isinstance(trace, models.TraceWithReport), trace
    assert trace.labels.additional_properties == {"branch": "main", "ci": "true"}
    assert [h.state.value for h in trace.state_history][-1] == "done"
    assert isinstance(trace.report, models.Report)
    report = read_report.sync(id=trace.id, client=client)
    assert isinstance(report, models.Report)
    assert report.to_dict() == trace.report.to_dict()
    assert {f.rule_id for f in report.findings} and all(isinstance(f.evidence[0], models.Evidence)
                                                        for f in report.findings if f.evidence)
    assert {c.root_cause for c in report.clusters} >= {"cuda_graph.host_sync_in_capture"}
    assert {a.path for a in report.trace.artifacts} == {p.name for p in paths}

    missing = read_report.sync(id=trace.id + 1000, client=client)  # not a trace of ours: a typed problem
    assert isinstance(missing, models.Problem)
    assert (missing.status, missing.type_) == (404, PROBLEM_TYPE_BASE + "not-found")
