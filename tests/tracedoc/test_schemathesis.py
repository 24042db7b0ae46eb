"""schemathesis against the running app as deployed (gunicorn + worker on PostgreSQL and Redis,
DEBUG off; tests/support/stack.py): every operation of the published OpenAPI schema, a bounded
number of generated requests each (valid and invalid), every check schemathesis has: no server
error, every status code, content type, header and body as documented, invalid requests
refused, auth enforced, deleted objects gone, unsupported methods a 405.

One check is left out, `positive_data_acceptance`: it counts a 400 or 422 to a request the
schema admits as a failure, and the API rightly refuses some of those, naming the parameter:
a team, destination, host or cluster that is not there, a rule's YAML or an SLO objective that
does not parse, an email destination without addresses, a failed trace's report (422). The
coverage phase is left out too: on Python 3.11 it crashes inside hypothesis (`SystemError: AST
constructor recursion depth mismatch`), before any request."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.stack import ROOT, running_stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

EXAMPLES_PER_OPERATION = 25
EXCLUDED_CHECKS = "positive_data_acceptance"
# revoking tokens would revoke the one the run authenticates with (its own test covers it)
EXCLUDED = ["v1_tokens_destroy"]
# fixed, and one worker: the same requests in the same order every run (reproducible); another
# seed (TRACEDOC_SCHEMATHESIS_SEED) tries new requests
SEED = int(os.environ.get("TRACEDOC_SCHEMATHESIS_SEED") or 20261201)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    # DEBUG off, as deployed: with it on, Django answers an unknown URL with its HTML debug page
    with running_stack(tmp_path_factory.mktemp("schemathesis"), DEBUG="0", SECRET_KEY="schemathesis-" + "k" * 40,
                       TRACEDOC_INSECURE_HTTP="1") as s:
        yield s


def test_no_server_error_and_every_response_matches_the_schema(stack, tmp_path):
    report = tmp_path / "schemathesis.json"
    command = [str(Path(sys.executable).parent / "st"), "run", f"{stack.url}/api/schema/?format=json",
               "-H", f"Authorization: Token {stack.token}", "--checks", "all",
               "--exclude-checks", EXCLUDED_CHECKS,
               "--max-examples", str(EXAMPLES_PER_OPERATION), "--phases", "examples,fuzzing",
               "--seed", str(SEED), "--workers", "1", "--generation-database", "none", "--no-color",
               "--request-timeout", "30", "--report", "json", "--report-json-path", str(report),
               *[arg for op in EXCLUDED for arg in ("--exclude-operation-id", op)]]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=200)
    summary = json.loads(report.read_text())
    tested = summary["operations"]
    assert tested["selected"] >= 50 and tested["tested"] == tested["selected"], summary["operations"]
    assert summary["failures"] == [] and summary["errors"] == [], run.stdout[-6000:] + stack.logs()
    assert run.returncode == 0, run.stdout[-6000:]
