"""docs/ci.md's GitHub Actions and GitLab CI jobs, and its curl example, run against a live
server: each runnable command as the CI runner would run it (bash -eo pipefail, the runner's
variables), the job's expected exit status, and the files the later steps read.

`tracedoc` on the PATH is the slim client: a Python where importing Django, pandas, pyarrow,
numpy, Celery or psycopg fails (a meta-path finder in sitecustomize), so the examples also
show that `tracedoc submit` needs none of them."""
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
from tests.web.live_stack import live_tracedoc, worker  # noqa: F401  (fixtures)
from tests.web.stack import ROOT

pytestmark = pytest.mark.timeout(400)
DOC = ROOT / "docs" / "ci.md"
# Steps that need the CI platform itself (installing the published client, the project's own
# benchmark, the GitHub CLI, GitHub actions): the test provides what they would.
NOT_RUN = re.compile(r"^(pip install|\./bench/|gh pr comment)")
SERVER_PACKAGES = ("django", "pandas", "pyarrow", "numpy", "celery", "kombu", "psycopg", "rest_framework")
BLOCKER = f'''import importlib.abc, sys
class _ServerOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {SERVER_PACKAGES!r}:
            raise ImportError(f"{{name}} is not installed (slim client)")
sys.meta_path.insert(0, _ServerOnly())
'''


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.fixture
def job_dir(tmp_path, corpus_dir):
    """The checkout a job runs in: the benchmark's traces, and the slim `tracedoc` first on the PATH."""
    work = tmp_path / "job"
    (work / "traces").mkdir(parents=True)
    for p in corpus("h200", "cudagraph_abort").iterdir():
        (work / "traces" / p.name).write_bytes(p.read_bytes())
    with tarfile.open(work / "traces.tar.gz", "w:gz") as tar:
        tar.add(work / "traces", arcname="traces")
    slim = tmp_path / "slim"
    slim.mkdir()
    (slim / "sitecustomize.py").write_text(BLOCKER)
    (slim / "tracedoc").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m cli.main "$@"\n')
    (slim / "tracedoc").chmod(0o755)
    return work, slim


def run_step(script: str, work: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300)


def job_env(slim: Path, live, **extra) -> dict:
    return {**os.environ, "PATH": f"{slim}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": f"{slim}{os.pathsep}{ROOT}",
            "TRACEDOC_SERVER": live.url, "TRACEDOC_TOKEN": live.token, **extra}


def test_the_slim_client_imports_no_server_package(job_dir):
    _, slim = job_dir
    probe = subprocess.run([sys.executable, "-c", "import django"], env={**os.environ, "PYTHONPATH": str(slim)},
                           capture_output=True, text=True)
    assert probe.returncode != 0 and "slim client" in probe.stderr
    help_text = subprocess.run([str(slim / "tracedoc"), "submit", "--help"], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": f"{slim}{os.pathsep}{ROOT}"})
    assert help_text.returncode == 0, help_text.stderr
    assert "--also" in help_text.stdout


def test_the_github_actions_job_runs(job_dir, live_tracedoc):  # noqa: F811
    work, slim = job_dir
    [workflow] = [yaml.safe_load(b) for b in blocks("yaml") if "runs-on" in b]
    summary = work / "step_summary.md"
    env = job_env(slim, live_tracedoc, GITHUB_REF_NAME="main", GITHUB_HEAD_REF="feature/x", GITHUB_SHA="abc123",
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
    listed = live_tracedoc  # the labels went with the upload, in key=value syntax
    import requests
    traces = requests.get(f"{listed.url}/api/v1/traces/?label=commit=abc123",
                          headers={"Authorization": f"Token {listed.token}"}, timeout=30).json()["results"]
    assert [t["labels"] for t in traces] == [{"branch": "feature/x", "commit": "abc123"}]
    assert traces[0]["name"] == "PR 7"


def test_the_gitlab_job_and_the_curl_example_run(job_dir, live_tracedoc):  # noqa: F811
    work, slim = job_dir
    [pipeline] = [yaml.safe_load(b) for b in blocks("yaml") if "before_script" in b]
    job = pipeline["tracedoc"]
    env = job_env(slim, live_tracedoc, CI_COMMIT_REF_NAME="main", CI_COMMIT_SHA="def456")
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
