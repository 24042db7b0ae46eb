"""docs/ci.md's GitHub Actions and GitLab CI jobs, and its curl example, run against a running
tracedoc (gunicorn + a Celery worker on PostgreSQL and Redis, tests/support/stack.py): each runnable
command as the CI runner would run it (bash -eo pipefail, the runner's variables), the job's
expected exit status, and the files the later steps read.

`tracedoc` on the PATH is the slim client as the jobs install it: the `tracedoc-client` wheel in
a bare virtual environment (tests/tracedoc/conftest.py builds it), so the examples also show that
`tracedoc submit` needs none of the server's packages."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import yaml

from tests.corpus import corpus
from tests.support.slim_client import SERVER_PACKAGES
from tests.support.stack import ROOT

pytestmark = pytest.mark.timeout(400)
DOC = ROOT / "docs" / "ci.md"
# Steps that need the CI platform itself (installing the published client, the project's own
# benchmark, the GitHub CLI, GitHub actions): the test provides what they would.
NOT_RUN = re.compile(r"^(pip install|\./bench/|gh pr comment)")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.fixture
def job_dir(tmp_path, corpus_dir, client_venv):
    """The checkout a job runs in: the benchmark's traces, and the slim client's bin/ (its
    `tracedoc`) to put first on the PATH."""
    work = tmp_path / "job"
    (work / "traces").mkdir(parents=True)
    for p in corpus("h200", "cudagraph_abort").iterdir():
        (work / "traces" / p.name).write_bytes(p.read_bytes())
    with tarfile.open(work / "traces.tar.gz", "w:gz") as tar:
        tar.add(work / "traces", arcname="traces")
    return work, client_venv


def run_step(script: str, work: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300)


def job_env(slim: Path, live, **extra) -> dict:
    bare = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "DJANGO_SETTINGS_MODULE")}
    return {**bare, "PATH": f"{slim}{os.pathsep}{os.environ['PATH']}", "TRACEDOC_SERVER": live.url,
            "TRACEDOC_TOKEN": live.token, **extra}


def test_the_slim_client_imports_no_server_package(job_dir):
    work, slim = job_dir
    for package in SERVER_PACKAGES:
        probe = subprocess.run([slim / "python", "-c", f"import {package}"], cwd=work, capture_output=True, text=True)
        assert probe.returncode != 0, package
    help_text = subprocess.run([str(slim / "tracedoc"), "submit", "--help"], cwd=work, capture_output=True, text=True)
    assert help_text.returncode == 0, help_text.stderr
    assert "--also" in help_text.stdout


def test_the_github_actions_job_runs(job_dir, stack):
    work, slim = job_dir
    [workflow] = [yaml.safe_load(b) for b in blocks("yaml") if "runs-on" in b]
    summary = work / "step_summary.md"
    env = job_env(slim, stack, GITHUB_REF_NAME="main", GITHUB_HEAD_REF="feature/x", GITHUB_SHA="abc123",
                  GITHUB_STEP_SUMMARY=str(summary))
    outcomes = {}
    for step in workflow["jobs"]["diagnose"]["steps"]:
        if "run" not in step or NOT_RUN.match(step["run"]):
            continue
        script = step["run"].replace("${{ github.event.number }}", "7")
        assert "${{" not in script, f"a GitHub expression the test does not provide: {script}"
        done = run_step(script, work, env)
        outcomes[step["name"]] = done
        assert done.returncode in (0, 1), done.stdout + done.stderr
    gate = outcomes["Diagnose (fails the job on error findings)"]
    assert gate.returncode == 1, gate.stderr  # cudagraph_abort has error findings: the job fails
    url = re.search(r"^report: (\S+)", gate.stdout, flags=re.M)[1]
    assert f"[Full report]({url})" in summary.read_text()
    sarif = json.loads((work / "tracedoc.sarif").read_text())
    assert sarif["runs"][0]["results"] and sarif["runs"][0]["properties"]["web_url"] == url
    suites = ET.parse(work / "tracedoc.xml").getroot().findall("testsuite")
    assert suites and all(s.find("properties/property[@name='url']").get("value") == url for s in suites)
    # the labels went with the upload, in key=value syntax
    traces = stack.api("get", "/api/v1/traces/?label=commit=abc123").json()["results"]
    assert [t["labels"] for t in traces] == [{"branch": "feature/x", "commit": "abc123"}]
    assert traces[0]["name"] == "PR 7"


def test_the_gitlab_job_and_the_curl_example_run(job_dir, stack):
    work, slim = job_dir
    [pipeline] = [yaml.safe_load(b) for b in blocks("yaml") if "before_script" in b]
    job = pipeline["tracedoc"]
    env = job_env(slim, stack, CI_COMMIT_REF_NAME="main", CI_COMMIT_SHA="def456")
    script = "\n".join(line for line in job["script"] if not NOT_RUN.match(line))
    gate = run_step(script, work, env)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    after = run_step("\n".join(job["after_script"]), work, env)
    assert after.returncode == 0 and "### tracedoc:" in after.stdout
    junit = ET.parse(work / job["artifacts"]["reports"]["junit"]).getroot()
    assert int(junit.get("failures")) >= 1
    for path in job["artifacts"]["paths"]:
        assert (work / path).stat().st_size > 0

    [curl] = blocks("sh")
    done = run_step(curl, work, env)
    assert done.returncode == 1, done.stdout + done.stderr  # error findings: exit 1, not a crash
    assert json.loads((work / "trace.json").read_text())["state"] == "done"


def test_the_documented_wheel_build_runs(tmp_path):
    [build] = blocks("shell")
    command = build.split("#")[0].strip().replace("--out dist/", f"--out {tmp_path}/dist/")
    assert command.startswith("python clients/python/build_wheel.py"), command
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", command.replace("python", sys.executable, 1)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    wheel = Path(done.stdout.strip())
    assert wheel.parent == tmp_path / "dist" and wheel.name.startswith("tracedoc_client-") and wheel.is_file()
