"""Every registered parser module meets the `Parser` Protocol: its attributes and the exact
signatures the registry and ingest.engine.parse call it with."""
import inspect

import pytest

import ingest.engine.parsers as registry
from ingest.engine.events import SOURCES
from ingest.engine.parsers import PARSERS, registered
from ingest.engine.parsers.protocol import Parser

MODULES = registered()


def _parameters(function) -> list[inspect.Parameter]:
    """Parameters as called on a module (a Protocol method's `self` is not passed)."""
    parameters = list(inspect.signature(function).parameters.values())
    return parameters[1:] if parameters and parameters[0].name == "self" else parameters


def _listed_name(module) -> str:
    """The module's name as PARSERS lists it: "family.module" under ingest.engine.parsers."""
    return module.__name__.removeprefix(f"{registry.__name__}.")


def test_every_listed_name_has_its_module():
    assert [_listed_name(m) for m in MODULES] == PARSERS


def test_every_parser_lives_in_a_family_package():
    assert all(len(name.split(".")) == 2 for name in PARSERS), PARSERS


@pytest.mark.parametrize("module", MODULES, ids=_listed_name)
def test_module_meets_the_protocol(module):
    for attribute in ("FORMAT", "SOURCE"):
        assert isinstance(getattr(module, attribute, None), str) and getattr(module, attribute), attribute
    assert module.SOURCE in SOURCES, f"source {module.SOURCE!r} is not one of ingest.engine.events.SOURCES"
    for method in ("sniff", "parse"):
        function = getattr(module, method, None)
        assert inspect.isfunction(function), f"{method} is not a function"
        wanted = [p.name for p in _parameters(getattr(Parser, method))]
        parameters = _parameters(function)
        assert [p.name for p in parameters[:len(wanted)]] == wanted, f"{method} signature"
        extra = parameters[len(wanted):]  # e.g. the log parser's year hint: callers never pass it
        assert all(p.default is not inspect.Parameter.empty for p in extra), f"{method}: extra without default"


def test_formats_are_unique():
    formats = [m.FORMAT for m in MODULES]
    assert len(set(formats)) == len(formats), sorted(f for f in formats if formats.count(f) > 1)


def test_a_listed_module_that_does_not_exist_is_an_error(monkeypatch):
    monkeypatch.setattr(registry, "PARSERS", [*PARSERS, "no_such_format"])
    with pytest.raises(ModuleNotFoundError):
        registry.registered()
