"""Build the `tracedoc-client` wheel: the modules of the server's tree that `tracedoc submit`
runs, with the metadata of this folder's pyproject.toml, written as a wheel (PEP 427) by the
standard library alone: any Python 3.11, offline, with no setuptools or `wheel` package (a
system Python's old setuptools without `wheel` failed at `bdist_wheel`). The same inputs give
the same bytes.

    python clients/python/build_wheel.py --out dist/

Before building, every project import of the staged modules is checked to be staged too, so a
new import on the submit path fails here, naming the module, rather than in a user's CI job.
"""
from __future__ import annotations

import argparse
import ast
import base64
import hashlib
import sys
import tomllib
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# the submit path: command, stdlib HTTP client, report types and renderers, nothing more
MODULES = (
    "cli/__init__.py", "cli/client.py", "cli/submit.py", "cli/submit_args.py", "cli/api_client.py",
    "cli/output.py",
    "agent/__init__.py", "agent/multipart.py",
    "rules/__init__.py", "rules/engine/severity.py", "rules/engine/results.py", "rules/engine/capture_plans.py", "rules/engine/quantities.py",
    "diagnosis/__init__.py", "diagnosis/engine/results.py", "diagnosis/engine/render/__init__.py", "diagnosis/engine/render/options.py",
    "diagnosis/engine/render/junit.py", "diagnosis/engine/render/sarif.py", "diagnosis/engine/render/markdown.py",
)
PACKAGES = ("cli", "agent", "rules", "diagnosis")


class IncompleteClient(Exception):
    """A staged module imports a project module that is not staged."""


def missing_imports(modules: tuple[str, ...] = MODULES, root: Path = ROOT) -> list[str]:
    """'file: imports X' for each module-level import of a project package that `modules` lack
    (imports under `if TYPE_CHECKING:` and inside functions included: the client must run them all)."""
    staged = {m.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for m in modules}
    missing = []
    for rel in modules:
        for node in ast.walk(ast.parse((root / rel).read_text(), filename=rel)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            for name in names:
                if name.split(".")[0] in PACKAGES and name not in staged:
                    missing.append(f"{rel}: imports {name}, which the client does not ship")
    return missing


# a wheel's entries carry this time, so one tree always builds the same bytes
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def metadata(project: dict, readme: str) -> str:
    """The core metadata (METADATA, version 2.1) of the pyproject's [project] table."""
    lines = [("Metadata-Version", "2.1"), ("Name", project["name"]), ("Version", project["version"]),
             ("Summary", project.get("description", "")), ("Requires-Python", project.get("requires-python", ""))]
    lines += [("Requires-Dist", d) for d in project.get("dependencies", [])]
    lines.append(("Description-Content-Type", "text/markdown"))
    return "".join(f"{k}: {v}\n" for k, v in lines if v) + "\n" + readme


def entry_points(project: dict) -> str:
    scripts = project.get("scripts", {})
    return "[console_scripts]\n" + "".join(f"{name} = {target}\n" for name, target in scripts.items())


def contents(root: Path = ROOT) -> dict[str, bytes]:
    """Every file of the wheel but RECORD, by its path inside it."""
    project = tomllib.loads((HERE / "pyproject.toml").read_text())["project"]
    info = f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    files = {rel: (root / rel).read_bytes() for rel in MODULES}
    files[f"{info}/METADATA"] = metadata(project, (HERE / "README.md").read_text()).encode()
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: tracedoc build_wheel.py\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    files[f"{info}/entry_points.txt"] = entry_points(project).encode()
    return files


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}\n"


def build(out: Path) -> Path:
    """The built wheel's path under `out`."""
    missing = missing_imports()
    if missing:
        raise IncompleteClient("; ".join(missing))
    project = tomllib.loads((HERE / "pyproject.toml").read_text())["project"]
    dist = project["name"].replace("-", "_")
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{dist}-{project['version']}-py3-none-any.whl"
    write_wheel(wheel, contents(), f"{dist}-{project['version']}.dist-info")
    return wheel


def write_wheel(wheel: Path, files: dict[str, bytes], info: str) -> None:
    """`files` (by their path inside the wheel) as a wheel with its RECORD, the same bytes for
    the same files."""
    record = f"{info}/RECORD"
    files = {**files, record: ("".join(_record_line(p, d) for p, d in files.items()) + f"{record},,\n").encode()}
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            entry = zipfile.ZipInfo(path, ZIP_TIME)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(entry, data)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "dist", help="folder the wheel is written to (default dist/)")
    args = p.parse_args(argv)
    try:
        print(build(args.out))
    except IncompleteClient as e:
        print(f"build_wheel: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
