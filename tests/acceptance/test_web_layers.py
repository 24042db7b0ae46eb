"""The web layers (issue 31): pyproject's `web-layers` contract, tools/app_graph.py's picture
(docs/architecture.md) and the real imports agree; the only upward imports left are the ones
the contract lists by name."""
import importlib.util
import sys
import tomllib

import pytest

from tests.support.stack import ROOT


def _load_app_graph():
    spec = importlib.util.spec_from_file_location("app_graph", ROOT / "tools" / "app_graph.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


app_graph = _load_app_graph()


@pytest.fixture(scope="module")
def contract() -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return next(c for c in config["contracts"] if c["id"] == "web-layers")


def test_the_contract_and_the_picture_rank_the_apps_alike(contract):
    assert contract["layers"] == list(app_graph.WEB_LAYERS)


def test_the_only_upward_imports_are_the_ones_the_contract_names(contract):
    upward = {f"{importer} -> {imported}" for arrow in app_graph.app_arrows() if arrow.upward
              for importer, imported in arrow.imports}
    named = {line for line in contract["ignore_imports"] if not line.endswith("-> cli.rules_parser")}
    assert upward == named


def test_an_upward_arrow_and_a_circle_are_seen():
    down = app_graph.Arrow("diagnosis", "ingest", (("diagnosis.views", "ingest.models"),))
    up = app_graph.Arrow("ingest", "diagnosis", (("ingest.views", "diagnosis.views"),))
    assert not down.upward and up.upward
    assert app_graph.circles([down]) == []
    assert app_graph.circles([down, up]) == [["diagnosis", "ingest"]]


def test_docs_architecture_shows_the_graph_of_today():
    """docs/architecture.md carries `python tools/app_graph.py --mermaid` as it prints now."""
    assert app_graph.mermaid(app_graph.app_arrows()) in (ROOT / "docs" / "architecture.md").read_text()
