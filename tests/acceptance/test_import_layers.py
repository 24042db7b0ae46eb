"""The layers of pyproject.toml's [tool.importlinter] cover every module, and no module
imports itself through others (an import circle), function-level imports included."""
import tomllib

import grimp
import pytest

from tests.support.stack import ROOT

APPS = ("ingest", "rules", "diagnosis")


@pytest.fixture(scope="module")
def contracts() -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return grimp.build_graph(*config["root_packages"], cache_dir=None)


def _covers(listed: set[str], module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in listed)


def test_every_module_of_an_app_is_engine_or_a_django_part(contracts, graph):
    """A new module must be placed: in the engine (Django-free, layered) or among the Django parts."""
    contract = contracts["engine-without-django"]
    engine, django_parts = set(contract["source_modules"]), set(contract["forbidden_modules"])
    unplaced = sorted(m for app in APPS for m in graph.find_descendants(app)
                      if not _covers(engine | django_parts, m) and not m.startswith(f"{m.split('.')[0]}.migrations")
                      and not graph.find_children(m))  # a package's modules are placed one by one
    assert unplaced == [], "add these to pyproject.toml's engine or Django-part lists"


def test_the_layers_list_the_same_engine_modules(contracts):
    engine = {m for m in contracts["engine-without-django"]["source_modules"] if m.split(".")[0] in APPS}
    layered = {m.strip() for layer in contracts["engine-layers"]["layers"] for m in layer.split(":")}
    assert layered == engine


def circles(graph: grimp.ImportGraph) -> list[str]:
    """Modules that import themselves through others (each import m -> d where d leads back to m)."""
    return sorted(m for m in graph.modules
                  if any(graph.chain_exists(importer=d, imported=m) for d in graph.find_modules_directly_imported_by(m)))


def test_no_import_circle(graph):
    assert circles(graph) == [], "each of these modules imports itself through others"


def test_a_circle_is_seen():
    graph = grimp.ImportGraph()
    for module in ("app.models", "app.tasks", "other.tasks", "app.views"):
        graph.add_module(module)
    for importer, imported in [("app.models", "app.tasks"), ("app.tasks", "other.tasks"),
                               ("other.tasks", "app.models"), ("app.views", "app.models")]:
        graph.add_import(importer=importer, imported=imported)
    assert circles(graph) == ["app.models", "app.tasks", "other.tasks"]
