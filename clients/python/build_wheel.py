"""Build the `tracedoc-client` wheel: the modules of the server's tree that `tracedoc submit`
runs, staged next to this folder's pyproject.toml and built by pip with the setuptools already
installed (no network, no build isolation).

    python clients/python/build_wheel.py --out dist/

Before building, every project import of the staged modules is checked to be staged too, so a
new import on the submit path fails here, naming the module, rather than in a user's CI job.
"""
from __future__ import annotations

import argparse
import ast
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# the submit path: command, stdlib HTTP client, report types and renderers, nothing more
MODULES = (
    "cli/__init__.py", "cli/client.py", "cli/submit.py", "cli/submit_args.py", "cli/api_client.py",
    "cli/output.py",
    "agent/__init__.py", "agent/multipart.py",
    "rules/__init__.py", "rules/severity.py", "rules/results.py", "rules/capture_plans.py", "rules/quantities.py",
    "diagnosis/__init__.py", "diagnosis/results.py", "diagnosis/render.py", "diagnosis/render_options.py",
    "diagnosis/render_junit.py", "diagnosis/render_sarif.py", "diagnosis/render_markdown.py",
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


def stage(into: Path) -> None:
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(HERE / name, into / name)
    for rel in MODULES:
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, into / rel)


def build(out: Path) -> Path:
    """The built wheel's path under `out`."""
    missing = missing_imports()
    if missing:
        raise IncompleteClient("; ".join(missing))
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tracedoc-client-") as tmp:
        stage(Path(tmp))
        before = set(out.glob("tracedoc_client-*.whl"))
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "--no-index", "--wheel-dir", str(out), tmp], check=True)
    built = sorted(set(out.glob("tracedoc_client-*.whl")) - before) or sorted(out.glob("tracedoc_client-*.whl"))
    return built[-1]


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
