"""The slim `tracedoc-client` distribution (clients/python/) as a CI job installs it: its wheel
built here offline, installed with its one dependency (msgspec) by `pip install --no-index` into a
bare virtual environment (no Django, pandas, pyarrow, requests), then `tracedoc-client` submits a corpus
trace to a running tracedoc (gunicorn + a Celery worker on PostgreSQL and Redis,
tests/support/stack.py) and gates on the diagnosis, and a refused upload's problem document
reaches the user."""
from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.corpus import corpus
from tests.support.slim_client import SERVER_PACKAGES
from tests.support.stack import ROOT

pytestmark = pytest.mark.timeout(400)
def run_client(bin_dir: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    bare = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "DJANGO_SETTINGS_MODULE")}
    return subprocess.run([str(bin_dir / "tracedoc-client"), *args], cwd=cwd, env={**bare, **env},
                          capture_output=True, text=True, timeout=300)


def test_the_wheel_installs_alone_and_answers_help(client_venv, tmp_path):
    for package in SERVER_PACKAGES:  # nothing of the server came with it
        probe = subprocess.run([client_venv / "python", "-c", f"import {package}"], capture_output=True,
                               text=True, cwd=tmp_path)
        assert probe.returncode != 0 and "No module named" in probe.stderr, package
    helped = run_client(client_venv, "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "submit" in helped.stdout, helped.stderr
    submit_help = run_client(client_venv, "submit", "--help", cwd=tmp_path)
    assert "--fail-on" in submit_help.stdout and "--also" in submit_help.stdout
    # the same command under the name the CI examples use
    assert subprocess.run([client_venv / "tracedoc", "submit", "--help"], capture_output=True).returncode == 0


def test_the_client_has_the_servers_version():
    server = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    client = tomllib.loads((ROOT / "clients" / "python" / "pyproject.toml").read_text())["project"]
    assert client["version"] == server
    # one dependency, msgspec, in the server's own range
    servers = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert client["dependencies"] == [d for d in servers if d.startswith("msgspec")]


def test_a_submit_round_trip_gates_on_the_diagnosis(client_venv, stack, corpus_dir, tmp_path):
    traces = corpus("h200", "cudagraph_abort")
    done = run_client(client_venv, "submit", str(traces), "--format", "json", "--labels", "branch=main",
                      "--timeout", "240", "--also", "sarif=out.sarif", "--also", "markdown=out.md", cwd=tmp_path,
                      TRACEDOC_SERVER=stack.url, TRACEDOC_TOKEN=stack.token)
    assert done.returncode == 1, done.stderr + stack.logs()  # cudagraph_abort has error findings
    printed = json.loads(done.stdout)
    [trace] = stack.api("get", "/api/v1/traces/?label=branch=main").json()["results"]
    stored = stack.api("get", f"/api/v1/traces/{trace['id']}/report/").json()
    assert [f["rule_id"] for f in printed["findings"]] == [f["rule_id"] for f in stored["findings"]]
    assert any(f["severity"] == "error" for f in printed["findings"])
    sarif = json.loads((tmp_path / "out.sarif").read_text())
    assert sarif["runs"][0]["properties"]["web_url"].endswith(f"/traces/{trace['id']}/")
    assert f"/traces/{trace['id']}/" in (tmp_path / "out.md").read_text()


def test_refused_uploads_say_why_and_exit_2(client_venv, live_tracedoc, settings, tmp_path):
    log = tmp_path / "rank0.log"
    log.write_text("x" * 500)
    settings.TRACEDOC_MAX_UPLOAD_BYTES = 100  # the live server runs in this process: it reads this
    too_big = run_client(client_venv, "submit", str(log), "--server", live_tracedoc.url, cwd=tmp_path,
                         TRACEDOC_TOKEN=live_tracedoc.token)
    assert too_big.returncode == 2
    assert "HTTP 413: upload larger than 100 bytes" in too_big.stderr  # the problem document's detail
    refused = run_client(client_venv, "submit", str(log), "--server", live_tracedoc.url, "--token", "nope",
                         cwd=tmp_path)
    assert refused.returncode == 2 and "refused the token (HTTP 401" in refused.stderr
    nowhere = run_client(client_venv, "submit", str(log), "--server", "http://127.0.0.1:9", "--token", "t",
                         cwd=tmp_path)
    assert nowhere.returncode == 2 and "cannot reach http://127.0.0.1:9" in nowhere.stderr
