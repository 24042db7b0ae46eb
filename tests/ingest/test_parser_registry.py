"""The registry's order (the Protocol each parser meets is checked in test_parser_contract.py)."""
from ingest.engine.parsers import PARSERS


def test_generic_text_logs_are_tried_last():
    assert PARSERS[-1] == "logs.parser"
