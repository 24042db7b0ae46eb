"""`make run` (scripts/run.sh) serves the pages a user sees in production (issue 32: it showed
Django's debug 404 page, URL patterns and settings included) and still serves the static
files, from static/ as they are. The real script on its embedded SQLite and broker, in a
folder of its own."""
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(240)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_run_serves_the_production_error_pages_and_the_static_files(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DEBUG", "SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "TRACEDOC_BASE_URL")}
    env.update(TRACEDOC_VAR=str(tmp_path / "var"), TRACEDOC_STORAGE=str(tmp_path / "storage"))
    run = subprocess.Popen(["bash", "scripts/run.sh", "127.0.0.1", str(port)], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                login = requests.get(f"{url}/accounts/login/", timeout=5)
                break
            except requests.ConnectionError:
                assert run.poll() is None, run.stdout.read().decode()[-3000:]
                assert time.monotonic() < deadline, "make run did not serve within 180 s"
                time.sleep(1)
        assert login.status_code == 200
        missing = requests.get(f"{url}/no-such-page/", timeout=10)
        assert missing.status_code == 404
        assert "<h1>Not found</h1>" in missing.text and "Back to the traces" in missing.text
        assert "URLconf" not in missing.text and "DEBUG = True" not in missing.text
        css = requests.get(f"{url}/static/css/app.css", timeout=10)
        assert css.status_code == 200 and css.text == (ROOT / "static" / "css" / "app.css").read_text()
        assert requests.get(f"{url}/static/js/nav.js", timeout=10).status_code == 200
        assert not (tmp_path / "var" / "static" / "css").exists()  # no collectstatic needed
    finally:
        os.killpg(run.pid, signal.SIGTERM)
        try:
            run.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=10)
