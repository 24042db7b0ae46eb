"""What the other ranks' own logs show decides a watchdog timeout (rules.engine.features.nccl): a peer
whose counters completed the timed-out seq ran a different collective; a peer whose log goes on
after the timeout with no timeout of its own was not in it; a peer whose log just ends says
nothing."""
from __future__ import annotations

import gzip
import re
from pathlib import Path

from diagnosis.engine.pipeline import diagnose
from ingest.engine.artifact_results import parse_one

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# the lines a rank prints when it receives another rank's dump signal: absent when the job runs
# with TORCH_NCCL_DUMP_ON_TIMEOUT=0 (the rest of the log is the same)
DUMP_SIGNAL = re.compile(r"flight recorder|dump signal|dump debug info|dumping nccl trace|Flight Recorder",
                         re.IGNORECASE)


def _read(path: Path) -> str:
    return gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text()


def timeouts(tmp_path: Path, logs: dict[str, str]) -> list[dict]:
    results = []
    for name, text in logs.items():
        (tmp_path / name).write_text(text)
        results.append(parse_one(name, tmp_path / name, tmp_path))
    report = diagnose(results).to_dict()
    return [f for f in report["findings"] if f["rule_id"].startswith("nccl.timeout")]


def _rank_logs(folder: str, drop_dump_lines_of: str | None = None) -> dict[str, str]:
    out = {}
    for path in sorted((FIXTURES / folder).glob("rank*.log*")):
        text = _read(path)
        if path.name.startswith(drop_dump_lines_of or "-"):
            text = "".join(line for line in text.splitlines(keepends=True) if not DUMP_SIGNAL.search(line))
        out[path.name.removesuffix(".gz")] = text
    return out


def test_a_peer_that_completed_the_seq_ran_a_different_collective(tmp_path):
    found = timeouts(tmp_path, _rank_logs("logs_only/nccl_op_mismatch_hang"))
    assert [f["root_cause"] for f in found] == ["nccl.collective_mismatch"]
    assert "rank(s) [1] of the same group had already completed seq 6" in found[0]["explanation"]


def test_a_peer_whose_log_goes_on_without_a_timeout_never_joined(tmp_path):
    logs = _rank_logs("logs_only/nccl_op_mismatch_hang", drop_dump_lines_of="rank1")
    assert "Last enqueued" not in logs["rank1.log"]  # no counters left to read
    found = timeouts(tmp_path, logs)
    assert [f["root_cause"] for f in found] == ["nccl.timeout.peer_missing"]
    text = found[0]["explanation"]
    assert "rank(s) [1] went on with no timeout or failure of their own" in text
    assert re.search(r"rank1\.log goes on \d+ s after it", text)


def test_a_peer_whose_log_ends_before_the_timeout_says_nothing(tmp_path):
    logs = _rank_logs("nccl_multirank/peer_missing", drop_dump_lines_of="rank1")
    found = timeouts(tmp_path, logs)
    assert found and all(f["root_cause"] == "nccl.timeout.undetermined" for f in found)
