"""`tracedoc diagnose` starts parsing before the report's imports are done: pandas and the rule
engine load in a thread beside the parse (diagnosis.engine.pipeline._WarmUp). Anything the main
thread imports on its way to the parse runs before it, on the command's critical path; these
tests keep the heavy modules off that path."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.corpus import ROOT, corpus

HEAVY = ("pandas", "rules.engine.compiler", "rules.engine.loader", "urllib.request", "http.client", "diagnosis.engine.render",
         "google.protobuf.json_format", "opentelemetry.proto.trace.v1.trace_pb2")


def _imported_after(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_building_the_command_line_imports_no_engine_nor_http_client():
    modules = _imported_after("import cli.main\ncli.main.build_parser()")
    assert [m for m in HEAVY if m in modules] == []


def test_the_diagnose_command_reaches_the_parse_without_pandas():
    """What cmd_diagnose and pipeline.run import before the first file is parsed, then the
    detection of every corpus format that comes before Kineto in the registry's order."""
    kineto = corpus("h200", "healthy_decode", "kineto_trace.json.gz")
    modules = _imported_after(
        "import cli.main\n"
        "from diagnosis.engine.pipeline import run\n"
        "from ingest.engine.events import ParseError\n"
        "from rules.engine.errors import RuleError\n"
        "from ingest.engine.parsers import detect\n"
        f"assert detect({str(kineto)!r}).FORMAT == 'kineto'\n")
    assert [m for m in HEAVY if m in modules] == []


def test_the_command_exits_with_its_status_and_the_whole_report(tmp_path):
    """`entry` leaves without the interpreter's teardown: the report on stdout must be whole."""
    trace = corpus("h200", "nccl_timeout")
    done = subprocess.run([sys.executable, "-c", "from cli.main import entry; entry()", "diagnose", "-q",
                           "--format", "json", str(trace)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert "nccl.timeout-stream-blocked" in {f["rule_id"] for f in report["findings"]}


def test_checking_a_rule_leaves_out_rfc3987_syntax_and_lets_others_load_it():
    """jsonschema imports rfc3987_syntax where it is installed (Jupyter's extras bring it),
    which builds 38 Lark grammars at import: ~1 s of a CLI run whose rule-pack cache is cold.
    The rule schema checks no IRI, so the loader imports jsonschema without it."""
    modules = _imported_after(
        "import importlib.util, sys\n"
        "from rules.engine.loader import load_rule_files\n"
        "from tests.corpus import ROOT\n"
        "assert load_rule_files([ROOT / 'rules' / 'builtin'])\n"
        "assert 'jsonschema' in sys.modules and 'rfc3987_syntax' not in sys.modules\n"
        "if importlib.util.find_spec('rfc3987_syntax'):\n"
        "    import rfc3987_syntax  # still importable by whoever wants it\n")
    assert "jsonschema" in modules


def test_the_collector_is_off_while_the_engine_imports_then_frozen_past_and_on_again():
    """cmd_diagnose turns the garbage collector off while pandas and the rule engine import
    (its passes walked their objects again and again); the warm-up thread freezes what they
    made and turns it on again before the report, and the command leaves it on."""
    trace = corpus("h200", "nccl_timeout")
    code = ("import contextlib, gc, io, threading\n"
            "from cli.main import build_parser, cmd_diagnose\n"
            "from diagnosis.engine import pipeline\n"
            "seen = []\n"
            "build = pipeline.diagnose\n"
            "pipeline.diagnose = lambda *a, **k: (seen.append((gc.isenabled(), gc.get_freeze_count())), build(*a, **k))[1]\n"
            f"args = build_parser().parse_args(['diagnose', '-q', '--format', 'json', {str(trace)!r}])\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    status = cmd_diagnose(args)\n"
            "print(status, seen[0][0], seen[0][1], gc.isenabled())\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    status, on_at_report, frozen, on_after = done.stdout.split()
    assert status == "1"  # the trace's NCCL timeout is an error finding
    assert on_at_report == "True" and int(frozen) > 100_000  # pandas alone makes more objects than that
    assert on_after == "True"
