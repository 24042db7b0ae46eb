"""The documented client wheel build, `python clients/python/build_wheel.py --out dist/`,
works with a system Python (issue 32 item 8: it ran `pip wheel --no-build-isolation`, which
needs setuptools >= 68 and the `wheel` package; Debian's Python 3.11 has setuptools 66 and no
`wheel`, and failed at `bdist_wheel`). The wheel is now written by the standard library alone:
built here with site-packages switched off, installed by pip, its RECORD checked."""
from __future__ import annotations

import base64
import csv
import hashlib
import io
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "clients" / "python" / "build_wheel.py"


def build(python: str, out: Path, *flags: str) -> Path:
    done = subprocess.run([python, *flags, str(BUILD), "--out", str(out)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


def test_the_wheel_builds_with_no_site_packages_at_all(tmp_path):
    """-I -S: no setuptools, no wheel, no pip; the standard library only."""
    wheel = build(sys.executable, tmp_path / "a", "-I", "-S")
    assert wheel.name == "tracedoc_client-0.1.0-py3-none-any.whl"
    assert build(sys.executable, tmp_path / "b").read_bytes() == wheel.read_bytes()  # the same bytes
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = "tracedoc_client-0.1.0.dist-info"
        assert {"cli/submit.py", "diagnosis/engine/render/sarif.py", f"{info}/METADATA", f"{info}/WHEEL"} <= names
        assert "tracedoc = cli.client:main" in z.read(f"{info}/entry_points.txt").decode()
        assert "Name: tracedoc-client\nVersion: 0.1.0\n" in z.read(f"{info}/METADATA").decode()
        rows = list(csv.reader(io.StringIO(z.read(f"{info}/RECORD").decode())))
        assert {r[0] for r in rows} == names
        for path, digest, size in rows:
            if path.endswith("RECORD"):
                continue
            data = z.read(path)
            assert digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert int(size) == len(data)


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="no system Python at /usr/bin/python3")
def test_the_documented_command_with_the_system_python_gives_an_installable_wheel(tmp_path):
    wheel = build("/usr/bin/python3", tmp_path / "dist")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    str(wheel)], check=True, timeout=300)
    helped = subprocess.run([venv / "bin" / "tracedoc", "submit", "--help"], capture_output=True, text=True,
                            timeout=60, cwd=tmp_path)
    assert helped.returncode == 0 and "--fail-on" in helped.stdout, helped.stderr
    shutil.rmtree(venv)
