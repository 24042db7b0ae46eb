"""The web layers (issue 31): pyproject's `web-layers` contract, tools/app_graph.py's picture
(docs/architecture.md) and the real imports agree: no upward import, no app circle."""
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


def test_no_upward_import_and_no_app_circle(contract):
    arrows = app_graph.app_arrows()
    assert [f"{i} -> {m}" for a in arrows if a.upward for i, m in a.imports] == []
    assert app_graph.circles(arrows) == []
    # the contract ignores only the command line's entry point, nothing between the apps
    assert contract["ignore_imports"] == ["rules.management.commands.rules -> cli.rules_parser"]


def test_an_upward_arrow_and_a_circle_are_seen():
    down = app_graph.Arrow("diagnosis", "ingest", (("diagnosis.views", "ingest.models"),))
    up = app_graph.Arrow("ingest", "diagnosis", (("ingest.views", "diagnosis.views"),))
    assert not down.upward and up.upward
    assert app_graph.circles([down]) == []
    assert app_graph.circles([down, up]) == [["diagnosis", "ingest"]]


def test_docs_architecture_shows_the_graph_of_today():
    """docs/architecture.md carries `python tools/app_graph.py --mermaid` as it prints now."""
    assert app_graph.mermaid(app_graph.app_arrows()) in (ROOT / "docs" / "architecture.md").read_text()
