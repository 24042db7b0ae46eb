"""Every registered parser keeps the contract of ingest/parsers/__init__.py and DESIGN.md."""
from ingest.events import SOURCES
from ingest.parsers import PARSERS, registered


def test_every_listed_parser_exists_and_declares_its_source():
    modules = registered()
    assert len(modules) == len(PARSERS)  # no name in the registry lacks its module
    for mod in modules:
        assert mod.SOURCE in SOURCES, f"{mod.__name__}: source {mod.SOURCE!r} is not one of DESIGN.md's"
        assert mod.FORMAT and callable(mod.sniff) and callable(mod.parse)


def test_generic_text_logs_are_tried_last():
    assert PARSERS[-1] == "log"
