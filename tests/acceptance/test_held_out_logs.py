"""The corpus copy has empty errors.log files; held-out captures carry the tracebacks torch
prints. Rebuild those bundles at run time (corpus trace + the log text) and check the whole
diagnosis: the traceback is the evidence, the follow-on error is a consequence, one cluster."""
import shutil

import pytest

from diagnosis import scenarios
from tests.corpus import CORPUS
from tests.parsers_logs.test_logs_fixtures import CAP_OOM_LOG, CAPTURE_LOG

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not found")


def bundle(tmp_path, scenario, log_name, text):
    folder = tmp_path / scenario
    shutil.copytree(CORPUS / "h200" / scenario, folder)
    (folder / log_name).chmod(0o644)
    (folder / log_name).write_text(text)
    return folder


def test_capture_abort_with_its_traceback(tmp_path):
    report = scenarios.report(bundle(tmp_path, "cudagraph_abort", "errors.log", CAPTURE_LOG))
    by_rule = {f["rule_id"]: f for f in report["findings"]}
    from_log = by_rule["cuda-graph.capture-host-sync"]
    assert from_log["severity"] in ("error", "critical")
    assert any("z.sum().item()" in ev["text"] and ev["artifact"] == "errors.log" for ev in from_log["evidence"])
    invalidated = by_rule["cuda-graph.capture-invalidated"]
    assert invalidated["consequence_of"] is not None
    capture = {c["id"] for c in report["clusters"] if c["root_cause"].startswith("cuda_graph.")}
    assert len(capture) == 1
    cluster = next(c for c in report["clusters"] if c["id"] in capture)
    assert cluster["root_cause"] == "cuda_graph.host_sync_in_capture"
    assert invalidated["id"] in cluster["findings"] and from_log["id"] in cluster["findings"]


def test_per_process_cap_oom_with_its_message(tmp_path):
    report = scenarios.report(bundle(tmp_path, "oom_fragmentation", "errors.log", CAP_OOM_LOG))
    causes = {f["root_cause"] for f in report["findings"]}
    assert "cuda_oom.process_cap" in causes
    assert not causes & {"cuda_oom.capacity", "cuda_oom.fragmentation"}
    cap = next(f for f in report["findings"] if f["root_cause"] == "cuda_oom.process_cap")
    assert "8.39 GiB" in cap["explanation"]
