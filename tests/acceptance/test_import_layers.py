"""The layers of pyproject.toml's [tool.importlinter] cover every module, and no module
imports itself through others (an import circle), function-level imports included."""
import copy
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
    return grimp.build_graph(*config["root_packages"], include_external_packages=True, cache_dir=None)


DJANGO = ("django", "rest_framework", "drf_spectacular", "django_htmx", "celery", "kombu")


def _covers(listed: set[str], module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in listed)


def _service_modules(graph: grimp.ImportGraph) -> list[str]:
    """Each app's modules outside its engine package (and its migrations), packages left out."""
    return sorted(m for app in APPS for m in graph.find_descendants(app)
                  if not _covers({f"{app}.engine", f"{app}.migrations"}, m) and not graph.find_children(m))


def test_every_module_outside_an_engine_is_forbidden_to_it(contracts, graph):
    """The engine contract forbids Django and the other apps; a module of an app outside its
    engine is forbidden through the Django it imports -- or must be named in the contract, else
    the engine could import it unseen (or it belongs in the engine)."""
    named = {m for m in contracts["engine-without-django"]["forbidden_modules"] if m.split(".")[0] in APPS}
    django = [d for d in DJANGO if d in graph.modules]
    unforbidden = [m for m in _service_modules(graph) if not _covers(named, m)
                   and not any(graph.chain_exists(importer=m, imported=d) for d in django)]
    assert unforbidden == [], "move these into their app's engine, or name them in engine-without-django"


def test_a_django_part_is_forbidden_through_django(graph):
    """What the contract relies on: an engine module importing a model reaches Django."""
    assert not graph.chain_exists(importer="ingest.engine.parse", imported="django")
    graph = copy.deepcopy(graph)  # the module fixture stays as built
    graph.add_import(importer="ingest.engine.parse", imported="ingest.models")
    assert graph.chain_exists(importer="ingest.engine.parse", imported="django")


def test_every_app_engine_is_a_checked_layer(contracts):
    engines = {m for m in contracts["engine-without-django"]["source_modules"] if m.split(".")[0] in APPS}
    assert engines == {f"{app}.engine" for app in APPS}
    assert set(contracts["engine-layers"]["layers"]) == engines


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
