"""`tracedoc diff BASE NEW` on corpus pairs: in-process diagnosis of both sides, the verdict
and exit status a CI gate reads, and every output format parses."""
import json

import pytest

from cli.main import main
from tests.corpus import CORPUS, ROOT

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not found")

HEALTHY = CORPUS / "h200" / "healthy_decode"
FRAGMENTED = CORPUS / "h200" / "fragmented_decode"
RERUN = ROOT / "tests" / "fixtures" / "h200_rerun"


def diff(capsys, *args):
    code = main(["diff", "-q", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def sli(result: dict, name: str) -> dict:
    return next(s for s in result["slis"] if s["name"] == name)


def test_churn_appears_tail_up_exit_1(capsys):
    code, out, _ = diff(capsys, HEALTHY, FRAGMENTED, "--format", "json", "--fail-on-regression", "5%")
    assert code == 1
    result = json.loads(out)
    appeared = [c["root_cause"] for c in result["clusters"] if c["status"] == "appeared"]
    assert appeared == ["allocator.churn"]
    assert {f["rule_id"] for f in result["findings"] if f["status"] == "appeared"} == {"allocator.churn",
                                                                                       "latency.jitter"}
    p50, p99, tail = (sli(result, n) for n in ("step_latency_p50", "step_latency_p99", "step_latency_tail"))
    assert tail["regressed"] and tail["new"] == pytest.approx(p99["new"] / p50["new"], abs=1e-3)
    assert tail["new"] > 2 > tail["base"]  # README: p99 about 2.4x the median with churn
    assert result["verdict"]["regression"] and any("tail" in r for r in result["verdict"]["reasons"])
    # figures the events give, on both sides
    for name in ("ttft", "gpu_busy_pct"):
        assert sli(result, name)["base"] > 0 and sli(result, name)["new"] > 0
    assert result["kernels"] and all(k["base_ms"] and k["new_ms"] for k in result["kernels"][:3])


def test_healthy_against_itself_is_nothing_exit_0(capsys):
    code, out, _ = diff(capsys, HEALTHY, HEALTHY, "--format", "markdown", "--fail-on-regression", "5",
                        "--fail-on", "info")
    assert code == 0
    assert out.startswith("### :white_check_mark: tracedoc diff: no regression")
    assert "**Clusters**: 0 appeared, 0 disappeared, 1 persisted" in out
    assert "**Findings**: 0 appeared, 0 disappeared, 1 persisted" in out
    assert "| step latency p99 |" in out and "+0.0%" in out and "REGRESSED" not in out


def test_rerun_against_the_corpus_persists_every_cluster(capsys):
    code, out, _ = diff(capsys, FRAGMENTED, RERUN / "fragmented_decode")
    assert code == 0  # SLIs are reported, not gated, without --fail-on-regression
    assert "clusters: 0 appeared, 0 disappeared, 1 persisted" in out
    assert "= [WARNING] allocator.churn" in out and "= [WARNING] latency.jitter" in out
    assert "REGRESSED" not in out


def test_unusable_side_exits_2_naming_the_file(tmp_path, capsys):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 64)
    code, _, err = diff(capsys, junk, HEALTHY)
    assert code == 2 and "junk.bin" in err
    code, _, err = diff(capsys, tmp_path / "nope", HEALTHY)
    assert code == 2 and "nope" in err


@pytest.mark.parametrize("value", ["fast", "-5%", "nan"])
def test_bad_regression_threshold_exits_2(capsys, value):
    with pytest.raises(SystemExit) as stop:
        main(["diff", str(HEALTHY), str(FRAGMENTED), "--fail-on-regression", value])
    assert stop.value.code == 2
    assert "--fail-on-regression" in capsys.readouterr().err
