"""Alert links open where the app is served (issue 32): `make run PORT=8200` (scripts/run.sh)
sets TRACEDOC_BASE_URL from HOST and PORT when the environment does not, and a start-up
check warns when the configured base URL disagrees with runserver's address."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from alerts.checks import base_url_check, disagreement, served_at

ROOT = Path(__file__).resolve().parents[2]
FAKE = "#!/bin/sh\necho \"$(basename \"$0\") $* base=$TRACEDOC_BASE_URL\" >> \"$(dirname \"$0\")/calls\"\n"


def run_script(tmp_path, *args: str, **env: str) -> list[str]:
    """scripts/run.sh with a stand-in .venv (python and celery only say how they were called)."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "run.sh", tmp_path / "scripts" / "run.sh")
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    for name in ("python", "celery"):
        (bin_ / name).write_text(FAKE)
        (bin_ / name).chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if k != "TRACEDOC_BASE_URL"}
    subprocess.run(["bash", str(tmp_path / "scripts" / "run.sh"), *args], env={**clean, **env}, check=True,
                   timeout=60, capture_output=True)
    return (bin_ / "calls").read_text().splitlines()


def test_make_run_on_another_port_links_to_that_port(tmp_path):
    serve = [c for c in run_script(tmp_path, "127.0.0.1", "8200") if "runserver" in c]
    assert serve == ["python manage.py runserver 127.0.0.1:8200 --noreload base=http://127.0.0.1:8200"]


def test_a_base_url_from_the_environment_is_kept(tmp_path):
    calls = run_script(tmp_path, "0.0.0.0", "8200", TRACEDOC_BASE_URL="https://tracedoc.example")
    assert all(c.endswith("base=https://tracedoc.example") for c in calls)


@pytest.mark.parametrize("argv, served", [
    (["manage.py", "runserver", "127.0.0.1:8200", "--noreload"], ("127.0.0.1", 8200)),
    (["manage.py", "runserver", "8300"], ("127.0.0.1", 8300)),
    (["manage.py", "runserver"], ("127.0.0.1", 8000)),
    (["manage.py", "runserver", "[::1]:8001"], ("::1", 8001)),
    (["manage.py", "migrate"], None),
])
def test_where_runserver_serves(argv, served):
    assert served_at(argv) == served


@pytest.mark.parametrize("base, served, warns", [
    ("http://127.0.0.1:8000", ("127.0.0.1", 8200), True),     # make run PORT=8200, base URL left at :8000
    ("http://127.0.0.1:8200", ("127.0.0.1", 8200), False),
    ("https://tracedoc.example", ("127.0.0.1", 8000), False),  # a proxy in front: fine
    ("http://localhost:8000", ("10.1.2.3", 8000), True),       # served to others, links for this machine only
    ("http://127.0.0.1:8000", None, False),                    # not serving: nothing to compare
])
def test_the_base_url_disagreement(base, served, warns):
    assert bool(disagreement(base, served)) is warns


def test_the_start_up_check_warns(settings, monkeypatch):
    settings.TRACEDOC_BASE_URL = "http://127.0.0.1:8000"
    monkeypatch.setattr("sys.argv", ["manage.py", "runserver", "127.0.0.1:8200", "--noreload"])
    [warning] = base_url_check()
    assert warning.id == "alerts.W001" and "8200" in warning.msg
    settings.TRACEDOC_BASE_URL = "http://127.0.0.1:8200"
    assert base_url_check() == []
