"""The image the Dockerfile builds, checked without a Docker daemon: the files its COPY
instructions take from the build context (less what .dockerignore leaves out) are placed in a
fresh folder, and `manage.py check --deploy` and `collectstatic` run there as the image runs
them (DEBUG=0, a SECRET_KEY) with this project's interpreter and *only* that folder on the path:
the editable install's finder, which would find every app in the source tree, is taken out, so an
app in INSTALLED_APPS that the image does not ship fails the import. docker-compose.yml is checked
for the services and keys the deployment relies on."""
from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]

# Python run in the image's folder with the editable install's finder removed: the project's
# packages come from sys.path[0] (the folder, as `python manage.py` in WORKDIR /app) or not at all.
_LAUNCH = """
import runpy, sys
def _editable(x):
    return (getattr(x, "__module__", "") or type(x).__module__ or "").startswith("__editable__")
sys.meta_path[:] = [f for f in sys.meta_path if not _editable(f)]
sys.path_hooks[:] = [h for h in sys.path_hooks if not _editable(h)]
sys.path[:] = [p for p in sys.path if "__editable__" not in p]
sys.path_importer_cache.clear()
sys.argv = ["manage.py", *sys.argv[1:]]
runpy.run_path("manage.py", run_name="__main__")
"""


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    logical, out = "", []
    for line in dockerfile.read_text().splitlines():
        if not logical and line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            logical += line.rstrip()[:-1] + " "
            continue
        logical += line
        if logical.strip():
            word, _, rest = logical.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
        logical = ""
    return out


def _glob_regex(pattern: str) -> re.Pattern:
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            if pattern.startswith("/", i):
                out, i = out + "(?:/|)", i + 1
            continue
        out += {"*": "[^/]*", "?": "[^/]"}.get(c, re.escape(c))
        i += 1
    return re.compile(out + "$")


def dockerignore(root: Path) -> list[tuple[bool, re.Pattern]]:
    """(negated, pattern) of .dockerignore in order: the last pattern that matches a path or one
    of its parent folders decides, as Docker's build context does."""
    path = root / ".dockerignore"
    rules = []
    for line in path.read_text().splitlines() if path.exists() else []:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        line = os.path.normpath(line.lstrip("!").strip().lstrip("/"))
        rules.append((negated, _glob_regex(line)))
    return rules


def ignored(relative: str, rules) -> bool:
    parts = relative.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    verdict = False
    for negated, pattern in rules:
        if any(pattern.match(p) for p in prefixes):
            verdict = not negated
    return verdict


def context_files(root: Path) -> list[str]:
    """The build context: every file under root that .dockerignore keeps."""
    rules = dockerignore(root)
    kept = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        # a folder ignored outright is not walked unless a later `!` pattern may re-include under it
        if not any(neg for neg, _ in rules):
            dirnames[:] = [d for d in dirnames if not ignored(rel_dir + d, rules)]
        kept += [rel_dir + f for f in filenames if not ignored(rel_dir + f, rules)]
    return kept


def image_files(root: Path = ROOT, dockerfile: str = "Dockerfile") -> dict[str, str]:
    """{path in WORKDIR: path in the build context} for the Dockerfile's COPY instructions (those
    from the build context; COPY --from copies from another stage and is refused here)."""
    context = context_files(root)
    placed: dict[str, str] = {}
    for word, rest in instructions(root / dockerfile):
        if word == "WORKDIR":
            assert rest == "/app", "the image test places files relative to WORKDIR /app"
        if word not in ("COPY", "ADD"):
            continue
        args = [a for a in shlex.split(rest) if not a.startswith("--chown") and not a.startswith("--chmod")]
        assert not any(a.startswith("--") for a in args), f"unsupported {word} flags: {rest}"
        *sources, dest = args
        dest = dest.removeprefix("./").removeprefix("/app/").rstrip("/")
        for source in sources:
            source = source.removeprefix("./").rstrip("/")
            if source == ".":
                matched = [(f, f) for f in context]
            else:
                pattern = _glob_regex(source)
                matched = []
                for f in context:
                    parts = f.split("/")
                    for n in range(1, len(parts) + 1):
                        if pattern.match("/".join(parts[:n])):
                            # a matched file keeps its name; a matched folder's contents keep theirs
                            matched.append((f, "/".join(parts[n - 1:]) if n == len(parts)
                                            else "/".join(parts[n:])))
                            break
            for f, below in matched:
                placed[f"{dest}/{below}" if dest not in ("", ".") else below] = f
    return placed


def build_tree(target: Path, root: Path = ROOT, dockerfile: str = "Dockerfile") -> Path:
    for inside, source in image_files(root, dockerfile).items():
        (target / inside).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / source, target / inside)
    return target


def manage(tree: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TRACEDOC_", "SECURE_", "DJANGO_", "DATABASE_", "PYTHON"))}
    var = tree.parent / "var"
    (var / "storage").mkdir(parents=True, exist_ok=True)
    env.update({"PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1", "DEBUG": "0",
                "SECRET_KEY": secrets.token_urlsafe(50), "TRACEDOC_VAR": str(var),
                "TRACEDOC_STORAGE": str(var / "storage")})
    return subprocess.run([sys.executable, "-c", _LAUNCH, *args], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=300)


def installed_apps() -> list[str]:
    from django.conf import settings
    return [app for app in settings.INSTALLED_APPS if (ROOT / app).is_dir()]


def test_every_installed_app_of_the_project_is_in_the_image():
    shipped = {path.split("/")[0] for path in image_files()}
    missing = [app for app in installed_apps() if app not in shipped]
    assert not missing, f"INSTALLED_APPS the Dockerfile does not copy: {missing}"
    for needed in ("manage.py", "pyproject.toml", "templates", "static", "cli", "agent"):
        assert needed in shipped


def test_the_build_context_leaves_out_the_local_state():
    files = image_files()
    for path in files:
        top = path.split("/")[0]
        assert not top.startswith("."), path  # .git, .venv, tool caches (.ruff_cache, ...)
        assert top not in ("var", "test-artifacts", "tests"), path
        assert "__pycache__" not in path and not path.endswith((".so", ".pyc")), path


def test_the_image_passes_the_deploy_check_and_collects_its_static_files(tmp_path):
    tree = build_tree(tmp_path / "app")
    done = manage(tree, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    done = manage(tree, "collectstatic", "--noinput")
    assert done.returncode == 0, done.stdout + done.stderr
    collected = tmp_path / "var" / "static"
    assert (collected / "css" / "app.css").is_file()
    assert (collected / "css" / "app.css.gz").is_file()  # the DEBUG=0 storage compresses what it collects
    assert (collected / "drf_spectacular_sidecar").is_dir()  # an installed package's files


def test_an_app_missing_from_the_image_fails_the_check(tmp_path):
    """The check sees only the image's folder: without `hosts/` it cannot start."""
    tree = build_tree(tmp_path / "app")
    shutil.rmtree(tree / "hosts", ignore_errors=True)
    done = manage(tree, "check", "--deploy")
    assert done.returncode != 0
    assert "No module named 'hosts'" in done.stderr


def test_the_dockerfile_runs_what_the_test_runs():
    """The image collects its static files at build time with DEBUG=0 and a key, as above, and
    installs the project editable: `python manage.py` in /app imports the apps from /app, where
    an editable install builds the C extensions (a plain install would put them in
    site-packages, beside copies of the apps nothing imports)."""
    runs = [rest for word, rest in instructions(ROOT / "Dockerfile") if word == "RUN"]
    assert any("manage.py collectstatic --noinput" in r and "DEBUG=0" in r for r in runs)
    assert any(re.search(r"pip install (-e|--editable) \.", r) for r in runs)


def test_the_compose_file_describes_the_stack():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    for name in ("postgres", "redis", "migrate", "web", "worker", "beat"):
        assert name in services, name
    app = [n for n, s in services.items() if s.get("build") == "."]
    assert set(app) >= {"migrate", "web", "worker", "beat"}
    for name in app:
        service = services[name]
        env = service["environment"]
        for key in ("DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY", "DEBUG"):
            assert key in env, (name, key)
        assert env["DEBUG"] == "0"
        assert "command" in service or name == "web"  # web runs the image's CMD
        assert service["depends_on"]  # after the database and broker, or after migrate
    for name in ("web", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    assert "migrate" in " ".join(services["migrate"]["command"])
    assert services["web"]["ports"] == ["8000:8000"]
    for name, service in services.items():  # every named volume used is declared
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if not source.startswith((".", "/")):
                assert source in compose["volumes"], (name, source)
    for name, service in services.items():
        for dep in service.get("depends_on", {}):
            assert dep in services, (name, dep)
