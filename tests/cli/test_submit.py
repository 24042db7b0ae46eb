"""`tracedoc submit` against a real local HTTP server answering in the documented API shape
(POST /api/v1/traces/, GET /api/v1/traces/{id}/, GET /api/v1/traces/{id}/report/). The
report it serves is a real one: `tracedoc diagnose --format json` of a corpus capture."""
import io
import json
import tarfile
from xml.etree import ElementTree as ET

import pytest

from cli.main import main
from rules.engine.severity import at_least
from tests.corpus import corpus

TRACE = {"id": 7, "name": "", "labels": {}, "state": "parsing", "error": "", "report": None,
         "web_url": "http://tracedoc.test/traces/7/", "report_url": "http://tracedoc.test/api/v1/traces/7/report/"}


@pytest.fixture(scope="module")
def report(corpus_dir):
    from diagnosis.engine.pipeline import run
    r = run([corpus("h200", "cudagraph_abort", "kineto_trace.json.gz")], show_progress=False)
    return json.loads(json.dumps(r.to_dict(), default=str))  # what travels over HTTP


def api(report, post=(201, {**TRACE}), later_state="done", error=""):
    """The server's answers: the upload, then the trace (as `later_state`), then its report."""
    def respond(rec):
        if rec.method == "POST" and rec.path == "/api/v1/traces/":
            return post
        if rec.path == "/api/v1/traces/7/":
            return 200, {**TRACE, "state": later_state, "error": error}
        if rec.path == "/api/v1/traces/7/report/":
            return 200, report
        return 404, {"detail": "Not found."}
    return respond


def submit(*args):
    return main(["submit", *map(str, args)])


def test_uploads_waits_and_prints_the_report_exiting_1_on_errors(tmp_path, stub_server, report, capsys):
    server = stub_server(api(report))
    trace_file = tmp_path / "kineto.json"
    trace_file.write_bytes(b'{"traceEvents": []}')
    rc = submit(trace_file, "--server", server.url, "--token", "k3y", "--labels", '{"ci": "true"}', "--wait", "30")

    out = capsys.readouterr().out
    errors = [f for f in report["findings"] if at_least(f["severity"], "error")]
    assert errors, "the corpus capture should give an error finding"
    assert rc == 1
    for f in report["findings"]:
        assert f["title"] in out
    post, *gets = server.received
    assert post.headers["Authorization"] == "Token k3y"
    assert post.query["wait"] == ["30"]
    assert json.loads(post.fields["labels"]) == {"ci": "true"}
    assert post.files == [("kineto.json", b'{"traceEvents": []}')]
    assert [g.path for g in gets] == ["/api/v1/traces/7/", "/api/v1/traces/7/report/"]


def test_fail_on_above_every_finding_exits_0(stub_server, report, capsys):
    server = stub_server(api(report, post=(201, {**TRACE, "state": "done", "report": report})))
    worst = max(report["findings"], key=lambda f: ["info", "warning", "error", "critical"].index(f["severity"]))
    assert worst["severity"] != "critical"
    rc = submit(corpus("h200", "cudagraph_abort", "kineto_trace.json.gz"), "--server", server.url,
                "--token", "k", "--fail-on", "critical")
    assert rc == 0
    assert len(server.received) == 1  # the report came with the upload's answer: nothing polled


def test_junit_output_counts_failures_at_fail_on(tmp_path, stub_server, report, capsys):
    server = stub_server(api(report))
    (tmp_path / "f.log").write_text("x\n")
    rc = submit(tmp_path / "f.log", "--server", server.url, "--token", "k", "--format", "junit")
    suite = ET.fromstring(capsys.readouterr().out)
    assert rc == 1
    assert int(suite.get("failures")) == sum(at_least(f["severity"], "error") for f in report["findings"])


def test_a_folder_goes_as_one_tar_gz(tmp_path, stub_server, report, capsys, monkeypatch):
    run_dir = tmp_path / "run-42"
    (run_dir / "rank0").mkdir(parents=True)
    (run_dir / "rank0" / "train.log").write_bytes(b"step 1\n")
    (run_dir / "nvml.jsonl").write_bytes(b'{"ts_ns": 1}\n')
    (run_dir / ".hidden").write_bytes(b"skip me")
    server = stub_server(api(report))
    monkeypatch.setenv("TRACEDOC_SERVER", server.url)  # the defaults come from the environment
    monkeypatch.setenv("TRACEDOC_TOKEN", "from-env")
    submit(run_dir)

    [(name, payload)] = server.received[0].files
    assert name == "run-42.tar.gz"
    with tarfile.open(fileobj=io.BytesIO(payload), mode="r:gz") as tar:
        assert {m.name: tar.extractfile(m).read() for m in tar.getmembers()} == {
            "nvml.jsonl": b'{"ts_ns": 1}\n', "rank0/train.log": b"step 1\n"}
    assert server.received[0].headers["Authorization"] == "Token from-env"


@pytest.mark.parametrize("respond, message", [
    (lambda rec: (401, {"detail": "Invalid token."}), "refused the token"),
    (lambda rec: (413, {"detail": "upload larger than 4,294,967,296 bytes"}), "upload larger than"),
    (lambda rec: (500, "<html>oops</html>"), "HTTP 500"),
])
def test_server_and_auth_errors_exit_2_with_a_message(tmp_path, stub_server, capsys, respond, message):
    server = stub_server(respond)
    (tmp_path / "a.log").write_text("x\n")
    assert submit(tmp_path / "a.log", "--server", server.url, "--token", "bad") == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_failed_diagnosis_exits_2_with_the_servers_reason(tmp_path, stub_server, report, capsys):
    server = stub_server(api(report, later_state="failed", error="no artifact could be parsed"))
    (tmp_path / "a.bin").write_bytes(b"\x00\x01")
    assert submit(tmp_path / "a.bin", "--server", server.url, "--token", "k") == 2
    assert "no artifact could be parsed" in capsys.readouterr().err


def test_a_diagnosis_slower_than_the_timeout_exits_2(tmp_path, stub_server, report, capsys):
    server = stub_server(api(report, later_state="parsing"))
    (tmp_path / "a.log").write_text("x\n")
    assert submit(tmp_path / "a.log", "--server", server.url, "--token", "k", "--timeout", "0.5") == 2
    assert "still parsing after 0 s" in capsys.readouterr().err


def test_a_short_wait_is_not_the_timeout(tmp_path, stub_server, report, capsys):
    """`--wait 1`: the server holds the answer 1 s, then the client polls until the diagnosis is
    done (within the 300 s default timeout), rather than giving up after 1 s (issue 32)."""
    answers = iter(["parsing", "diagnosing"])
    done = api(report)

    def respond(rec):
        if rec.path == "/api/v1/traces/7/":
            return 200, {**TRACE, "state": next(answers, "done")}
        return done(rec)
    server = stub_server(respond)
    (tmp_path / "a.log").write_text("x\n")
    rc = submit(tmp_path / "a.log", "--server", server.url, "--token", "k", "--wait", "1")
    out = capsys.readouterr()
    assert rc == (1 if any(at_least(f["severity"], "error") for f in report["findings"]) else 0), out.err
    assert "still" not in out.err
    assert [r.query.get("wait") for r in server.received if r.method == "POST"] == [["1"]]
    assert [r.path for r in server.received].count("/api/v1/traces/7/") == 3  # polled past the wait


def test_unreachable_server_missing_file_and_no_token_exit_2(tmp_path, closed_port_url, capsys, monkeypatch):
    monkeypatch.delenv("TRACEDOC_TOKEN", raising=False)
    (tmp_path / "a.log").write_text("x\n")
    assert submit(tmp_path / "a.log", "--server", closed_port_url, "--token", "k") == 2
    assert "cannot reach" in capsys.readouterr().err
    assert submit(tmp_path / "missing.log", "--server", closed_port_url, "--token", "k") == 2
    assert "missing.log" in capsys.readouterr().err
    assert submit(tmp_path / "a.log", "--server", closed_port_url) == 2
    assert "no token" in capsys.readouterr().err
