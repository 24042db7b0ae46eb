"""A parser bug is contained: the file is named with where the parser was, the other files
are still diagnosed, the CLI exits 3 (never 1, which CI reads as findings) and prints no
traceback; an internal error is never a finding."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import EXIT_INTERNAL, main
from ingest.engine.artifact_results import parse_one

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"
PMON = CAPTURES / "nvidia_smi_pmon" / "sonar_4gpu_pmon_s_mu.txt"
PENDING = CAPTURES / "nvidia_smi" / "azurehpc_8gpu_535_page_retirement_pending.txt"


@pytest.fixture
def broken_pmon(monkeypatch):
    import ingest.engine.parsers.nvidia_smi.pmon as pmon

    # a parse() of the parsers package (the position is read from their frames' `loc`)
    code = ("def parse(path, sink, report):\n"
            "    loc = 'line 7'\n"
            "    return {}['a key a bug forgot']\n")
    namespace = {"__name__": pmon.__name__}
    exec(code, namespace)
    monkeypatch.setattr(pmon, "parse", namespace["parse"])


def test_parse_one_contains_a_parser_bug(broken_pmon, tmp_path):
    result = parse_one(PMON.name, PMON, tmp_path)
    assert result.internal_error and result.parquet is None
    assert result.error.startswith(f"{PMON.name}: line 7: internal error in the nvidia_smi_pmon parser (KeyError")
    assert result.to_report()["internal_error"] is True


def test_cli_exits_3_and_still_diagnoses_the_rest(broken_pmon, capsys):
    rc = main(["diagnose", "-q", "--format", "json", str(PMON), str(PENDING)])
    out, err = capsys.readouterr()
    assert rc == EXIT_INTERNAL == 3
    assert "Traceback" not in err and f"{PMON.name}: line 7: internal error" in err
    report = json.loads(out)
    assert {f["root_cause"] for f in report["findings"]} == {"gpu.ecc"}  # the other file, diagnosed
    assert not any("internal error" in json.dumps(f) for f in report["findings"])
    crashed = [a for a in report["trace"]["artifacts"] if a.get("internal_error")]
    assert [a["path"] for a in crashed] == [PMON.name]


def test_cli_exit_codes_without_bugs(capsys, tmp_path):
    assert main(["diagnose", "-q", str(PMON)]) == 0
    assert main(["diagnose", "-q", str(PENDING)]) == 1
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01\x02 not a trace")
    assert main(["diagnose", "-q", str(junk)]) == 2
    capsys.readouterr()


def test_cli_internal_error_outside_the_parsers(monkeypatch, capsys):
    import diagnosis.engine.pipeline

    def run(*args, **kwargs):
        raise RuntimeError("a bug in the rules engine")
    monkeypatch.setattr(diagnosis.engine.pipeline, "run", run)
    assert main(["diagnose", "-q", str(PMON)]) == 3
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: a bug in the rules engine" in err and "Traceback" not in err
