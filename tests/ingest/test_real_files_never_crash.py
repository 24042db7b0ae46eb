"""Every real capture we have is parsed or refused with a ParseError that names the file —
never a traceback, never an internal error — through the path the CLI takes (bundle
expansion, then `parse_one` per member)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from ingest.engine.artifact_results import parse_one
from ingest.engine.bundle import expand
from tests.corpus import CORPUS

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "tests" / "fixtures" / "captures"
SKIP = {"SOURCES.md", "EXPECTED.md", "README.md", "make_captures.py"}
# the format a capture folder's files are read as, or per file suffix (the others: nvidia-smi's, of their kind)
FOLDER_FORMAT: dict[str, str | dict[str, str]] = {
    "chrome_trace_array": "kineto", "plain_text": "log",
    "h100_issue33": {".pickle": "memory_snapshot", ".csv": "ncu_csv"},
}


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name not in SKIP) if root.is_dir() else []


PUBLIC = _files(CORPUS / "public")
FIXTURES = _files(CAPTURES)


def _check(path: Path, label: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        with expand([path], Path(tmp) / "unpacked") as members:
            assert list(members), f"{label}: nothing to parse"
            for member in members:
                result = parse_one(member.name, member.path, Path(tmp))
                assert not result.internal_error, result.error
                if result.error:
                    # refused: the message names the file and says what was expected
                    assert result.error.startswith(member.name), result.error
                    assert "Traceback" not in result.error
                else:
                    assert result.format and result.parquet is not None


@pytest.mark.parametrize("path", PUBLIC, ids=[str(p.relative_to(CORPUS)) for p in PUBLIC])
def test_public_corpus_file_parses_or_is_refused_cleanly(path):
    _check(path, str(path.relative_to(CORPUS)))


@pytest.mark.parametrize("path", FIXTURES, ids=[str(p.relative_to(CAPTURES)) for p in FIXTURES])
def test_capture_fixture_parses(path):
    with tempfile.TemporaryDirectory() as tmp:
        result = parse_one(path.name, path, Path(tmp))
    assert not result.error, result.error  # real captures of supported formats: read, not refused
    expected = FOLDER_FORMAT.get(path.relative_to(CAPTURES).parts[0], "nvidia_smi")
    if isinstance(expected, dict):
        expected = expected[path.suffix]
    assert result.format.startswith(expected), result.format


def test_public_corpus_is_there():
    if not CORPUS.is_dir():
        pytest.skip("shared corpus not found beside the project")
    assert PUBLIC
