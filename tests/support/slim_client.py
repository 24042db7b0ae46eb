"""The slim `tracedoc-client` wheel (clients/python/), installed with its one dependency into a
fresh virtual environment by tests/tracedoc/conftest.py's `client_venv`: what it must not bring
along, and that dependency's wheel made offline."""
import base64
import hashlib
import importlib.metadata
import zipfile
from pathlib import Path

# what the server needs and the client must not (`tracedoc` itself included)
SERVER_PACKAGES = ("django", "pandas", "pyarrow", "numpy", "requests", "celery", "psycopg", "tracedoc")


def wheel_of_installed(name: str, out: Path) -> Path:
    """A wheel of a distribution installed in this interpreter, written from its own files, so a
    test can install a dependency of the client into a bare venv offline (`--no-index`). Only
    for the tests: the files as installed (bytecode caches left out), its METADATA and WHEEL."""
    dist = importlib.metadata.distribution(name)
    tag = next(line.split(": ", 1)[1] for line in (dist.read_text("WHEEL") or "").splitlines()
               if line.startswith("Tag: "))
    info = f"{dist.metadata['Name'].replace('-', '_')}-{dist.version}.dist-info"
    wheel = out / f"{info.removesuffix('.dist-info')}-{tag}.whl"
    records = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for f in dist.files or []:
            if "__pycache__" in f.parts or f.name in ("RECORD", "INSTALLER", "direct_url.json"):
                continue
            data = f.locate().read_bytes()
            z.writestr(str(f), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{f},sha256={digest},{len(data)}")
        z.writestr(f"{info}/RECORD", "\n".join(records + [f"{info}/RECORD,,"]) + "\n")
    return wheel
