"""The refusal shape ParseError offers (issue 33): '<file>: <where>: expected <what>; got <found>',
with 'got' a bounded excerpt whatever the input's size."""
from __future__ import annotations

from ingest.engine.events import MAX_GOT, ParseError, describe, excerpt


def test_got_is_a_bounded_excerpt_whatever_the_input():
    huge = "x" * 10_000_000
    assert len(excerpt(huge)) < 50 and excerpt(huge).endswith("...")
    assert excerpt(b"") == "nothing (empty)"
    assert len(describe({str(i): i for i in range(100_000)})) < 200
    assert len(describe(huge)) < 60
    message = str(ParseError("f.log", "line 3", "a header", got=huge))
    assert message.startswith("f.log: line 3: expected a header; got x") and len(message) < 60 + MAX_GOT


def test_expected_is_not_doubled():
    assert str(ParseError("f.log", "byte 0", "expected a trace", got="text")) == "f.log: byte 0: expected a trace; got text"


def test_a_message_without_got_keeps_its_shape():
    """Out of memory and internal errors are not refusals of the input: no 'got' is invented."""
    assert str(ParseError("f.log", "after 3 events", "more memory")) == "f.log: after 3 events: more memory"
