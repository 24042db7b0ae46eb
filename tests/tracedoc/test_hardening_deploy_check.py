"""Production settings (DEBUG off, a real SECRET_KEY) pass `manage.py check --deploy` with no
warning: HTTPS redirect, HSTS and secure cookies are on unless TRACEDOC_INSECURE_HTTP says so."""
import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _check_deploy(**extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEDOC_", "SECURE_"))}
    env.update({"DJANGO_SETTINGS_MODULE": "tracedoc.settings", "DEBUG": "0",
                "SECRET_KEY": secrets.token_urlsafe(50), **extra})
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_production_settings_pass_the_deploy_check():
    done = _check_deploy()
    assert done.returncode == 0, done.stdout + done.stderr


def test_plain_http_is_a_choice_the_deploy_check_reports():
    done = _check_deploy(TRACEDOC_INSECURE_HTTP="1")
    assert done.returncode != 0
    for code in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert code in done.stdout + done.stderr
