"""The slim `tracedoc-client` wheel (clients/python/), installed with its one dependency into a
fresh virtual environment by tests/tracedoc/conftest.py's `client_venv`: what it must not bring
along, and that dependency's wheel made offline."""
import importlib.metadata
import importlib.util
from pathlib import Path

from tests.support.stack import ROOT

# what the server needs and the client must not (`tracedoc` itself included)
SERVER_PACKAGES = ("django", "pandas", "pyarrow", "numpy", "requests", "celery", "psycopg", "tracedoc")


def wheel_of_installed(name: str, out: Path) -> Path:
    """A wheel of a distribution installed in this interpreter, written from its own files by the
    client's own wheel writer, so a test can install a dependency of the client into a bare venv
    offline (`--no-index`). Only for the tests: the files as installed (bytecode caches left out)."""
    dist = importlib.metadata.distribution(name)
    tag = next(line.split(": ", 1)[1] for line in (dist.read_text("WHEEL") or "").splitlines()
               if line.startswith("Tag: "))
    info = f"{dist.metadata['Name'].replace('-', '_')}-{dist.version}.dist-info"
    files = {str(f): f.locate().read_bytes() for f in dist.files or []
             if "__pycache__" not in f.parts and f.name not in ("RECORD", "INSTALLER", "direct_url.json")}
    wheel = out / f"{info.removesuffix('.dist-info')}-{tag}.whl"
    _build_wheel().write_wheel(wheel, files, info)
    return wheel


def _build_wheel():
    """clients/python/build_wheel.py, a script rather than a package, loaded as a module."""
    spec = importlib.util.spec_from_file_location("build_wheel", ROOT / "clients" / "python" / "build_wheel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
