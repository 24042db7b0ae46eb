"""`tracedoc diagnose`: in-process, no server; exit 0/1/2; every output format parses."""
import gzip
import json
import subprocess
import sys
from xml.etree import ElementTree as ET

import pytest

from cli.main import main
from tests.corpus import CORPUS, ROOT

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not found")


def run(capsys, *args):
    code = main(["diagnose", "-q", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_findings_at_error_exit_1_with_the_json_contract(capsys):
    code, out, _ = run(capsys, CORPUS / "h200" / "cudagraph_abort", "--format", "json")
    assert code == 1
    report = json.loads(out)
    assert {a["path"] for a in report["trace"]["artifacts"]} == {"errors.log", "kineto_trace.json.gz"}
    finding = next(f for f in report["findings"] if f["root_cause"] == "cuda_graph.host_sync_in_capture")
    for key in ("rule_id", "rule_version", "title", "severity", "root_cause", "slo", "cluster", "start_ts",
                "end_ts", "explanation", "recommendations", "evidence", "metrics"):
        assert key in finding
    assert set(report["clusters"][0]) >= {"id", "fingerprint", "root_cause", "title", "severity", "findings"}


def test_healthy_trace_exits_0_and_fail_on_lowers_the_bar(capsys):
    assert run(capsys, CORPUS / "h200" / "healthy_decode")[0] == 0
    # the cold-start note is info: failing on info turns it into exit 1
    assert run(capsys, CORPUS / "h200" / "healthy_decode", "--fail-on", "info")[0] == 1


def test_junit_and_sarif(capsys):
    code, out, _ = run(capsys, CORPUS / "h200" / "fragmented_decode", "--format", "junit", "--fail-on", "warning")
    suite = ET.fromstring(out)
    assert code == 1 and int(suite.get("failures")) >= 1
    assert any(tc.get("classname") == "allocator.churn" for tc in suite.iter("testcase"))
    code, out, _ = run(capsys, CORPUS / "h200" / "fragmented_decode", "--format", "sarif")
    sarif = json.loads(out)
    assert sarif["version"] == "2.1.0"
    assert {r["ruleId"] for r in sarif["runs"][0]["results"]} >= {"allocator.churn"}


@pytest.mark.parametrize("name,content,expected", [
    ("empty.json", b"", "empty"),
    ("junk.bin", bytes(range(256)) * 64, "binary"),
    ("trace.json.gz", (CORPUS / "h200" / "healthy_decode" / "kineto_trace.json.gz").read_bytes()[:50_000],
     "truncated"),
    ("small.json.gz", gzip.compress(b'{"traceEvents": [' + b'{"ph": "X", "ts": 1},' * 20)[:30], "truncated"),
    ("config.json", b'{"model": "llama", "layers": 32}', "JSON document of an unknown kind"),
])
def test_unusable_input_exits_2_naming_the_file(tmp_path, capsys, name, content, expected):
    path = tmp_path / name
    path.write_bytes(content)
    code, _, err = run(capsys, path)
    assert code == 2
    assert name in err and expected in err


def test_missing_path_exits_2(tmp_path, capsys):
    code, _, err = run(capsys, tmp_path / "nope")
    assert code == 2 and "nope" in err


def test_console_script_runs_without_django(tmp_path):
    """The installed `tracedoc` entry point: a subprocess with no settings module at all."""
    env = {"PATH": str(ROOT / ".venv" / "bin"), "TRACEDOC_CORPUS": str(CORPUS)}
    done = subprocess.run([sys.executable, "-m", "cli.main", "diagnose", "-q", str(CORPUS / "h200" / "nccl_timeout")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "nccl.timeout.stream_blocked" in done.stdout
    assert "django" not in done.stderr.lower()
