"""Fuzz every registered parser with damaged real files: truncated, byte-mutated, two formats
glued together, truncated gzip. The only acceptable outcomes are a clean parse or a
ParseError; anything else is a parser bug (it would surface as an internal error, exit 3).

Seeds are real files (the shared corpus and tests/fixtures/captures), cut to their first
SEED_BYTES so a run takes seconds. derandomize=True: CI runs the same examples every time.
"""
from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.engine.events import EventSink, ParseError, ParseReport
from ingest.engine.parse import InternalParseError, parse_artifact, run_parser
from ingest.engine.parsers import registered
from tests.corpus import CORPUS

ROOT = Path(__file__).resolve().parents[2]
SEED_BYTES = 24 * 1024
MAX_SEED_FILE = 4 * 2**20
SKIP = {"SOURCES.md", "EXPECTED.md", "README.md"}
# TRACEDOC_FUZZ_EXAMPLES=500 explores further (random, not derandomized) when hunting crashes
EXAMPLES = int(os.environ.get("TRACEDOC_FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=EXAMPLES or 10, derandomize=not EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _content(path: Path) -> bytes:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path) as f:
                return f.read(SEED_BYTES)
        except (OSError, EOFError):
            return raw[:SEED_BYTES]
    return raw[:SEED_BYTES]


def _seeds() -> list[tuple[str, bytes]]:
    roots = [CORPUS / "public", CORPUS / "h200", CORPUS / "cpu", ROOT / "tests" / "fixtures" / "captures"]
    seeds = []
    for root in roots:
        for p in sorted(root.rglob("*")) if root.is_dir() else []:
            if p.is_file() and p.name not in SKIP and p.suffix != ".py" and p.stat().st_size <= MAX_SEED_FILE:
                seeds.append((p.name.removesuffix(".gz"), _content(p)))
    return seeds


SEEDS = _seeds()
PARSERS = registered()


def _own_seeds(mod) -> list[tuple[str, bytes]]:
    """The seeds this parser would be chosen for (its own format), else all of them."""
    own = []
    for name, data in SEEDS:
        try:
            if mod.sniff(data[:65536], name):
                own.append((name, data))
        except Exception:
            pass  # test_sniff_never_raises reports it
    return own or SEEDS


@st.composite
def damaged(draw, seeds):
    name, data = draw(st.sampled_from(seeds))
    how = draw(st.sampled_from(["truncate", "flip", "mix", "lines", "gzip_truncated"]))
    if how == "truncate":
        data = data[:draw(st.integers(0, len(data)))]
    elif how == "flip" and data:
        data = bytearray(data)
        for _ in range(draw(st.integers(1, 8))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        data = bytes(data)
    elif how == "mix" and SEEDS:
        _, other = draw(st.sampled_from(SEEDS))
        data = data[:draw(st.integers(0, len(data)))] + other[draw(st.integers(0, len(other))):]
    elif how == "lines":
        lines = data.split(b"\n")
        i, j = draw(st.integers(0, len(lines))), draw(st.integers(0, len(lines)))
        data = b"\n".join(lines[:min(i, j)] + lines[max(i, j):] + lines[min(i, j):max(i, j)])
    elif how == "gzip_truncated":
        packed = gzip.compress(data)
        data = packed[:draw(st.integers(2, len(packed)))]
    return name, data


def _parse_with(mod, name: str, data: bytes, workdir: Path) -> None:
    """The parser as parse_artifact runs it; events built into Arrow batches (wrong types
    fail there) but not written."""
    path = workdir / name
    path.write_bytes(data)
    sink = EventSink("fuzz", mod.SOURCE, lambda batch: None, batch_rows=4096)
    report = ParseReport(format=mod.FORMAT)
    try:
        run_parser(mod, path, sink, report, name)
    except InternalParseError as e:
        raise AssertionError(str(e)) from e.__cause__
    except ParseError as e:
        assert str(e).startswith(name), "a ParseError names the file and says what was expected"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def test_there_are_seeds():
    if not CORPUS.is_dir():
        pytest.skip("shared corpus not found beside the project")
    assert len(SEEDS) > 20


@pytest.mark.parametrize("mod", PARSERS, ids=[m.FORMAT for m in PARSERS])
def test_parser_survives_damaged_files(mod, workdir):
    @FUZZ
    @given(damaged(_own_seeds(mod)))
    def check(case):
        _parse_with(mod, *case, workdir)

    check()


@pytest.mark.parametrize("mod", PARSERS, ids=[m.FORMAT for m in PARSERS])
def test_sniff_never_raises(mod):
    @FUZZ
    @given(damaged(SEEDS))
    def check(case):
        name, data = case
        mod.sniff(data[:65536], name)  # any answer; an exception would hide the file from every parser

    check()


@FUZZ
@given(damaged(SEEDS))
def test_detect_and_parse_refuse_cleanly(case):
    """The CLI's path: detection picks a parser for damaged content, which reads it or
    refuses it with a ParseError naming the file, never an internal error."""
    name, data = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in"
        path.write_bytes(data)
        try:
            parse_artifact(path, Path(tmp) / "out.parquet", artifact_id=name, name=name)
        except InternalParseError as e:
            raise AssertionError(str(e)) from e.__cause__
        except ParseError as e:
            assert str(e).startswith(name)
