"""The report stores the trace's headline SLIs (`slis`: time to first token, GPU busy), the same
figures `tracedoc diff` measures on the events, so a stored report gives them to the server's
diff and to /metrics without its events; a report stored before them still diffs, with the reason."""
import pytest

from diagnosis.engine import scenarios
from diagnosis.engine.results import Report
from diagnosis.engine.diff.stored import compare_stored
from diagnosis.engine.trace_figures import measure
from tests.corpus import corpus


@pytest.fixture(scope="module")
def healthy(corpus_dir):
    return scenarios.report(corpus("h200", "healthy_decode"))


@pytest.fixture(scope="module")
def fragmented(corpus_dir):
    return scenarios.report(corpus("h200", "fragmented_decode"))


def test_the_report_stores_the_figures_the_events_give(healthy, corpus_dir):
    measured = measure(scenarios.events(corpus("h200", "healthy_decode")))
    assert healthy["slis"] == {"ttft_ms": measured.ttft_ms, "gpu_busy_pct": measured.gpu_busy_pct}
    assert healthy["slis"]["ttft_ms"] > 0  # a decode run with token-emitting steps
    assert Report.from_dict(healthy).to_dict()["slis"] == healthy["slis"]


def test_a_trace_without_token_steps_stores_none(corpus_dir):
    slis = scenarios.report(corpus("h200", "compile_cudagraphs"))["slis"]
    assert set(slis) == {"ttft_ms", "gpu_busy_pct"} and slis["ttft_ms"] is None


def test_the_stored_diff_reads_ttft_from_the_reports(healthy, fragmented):
    slis = {s.name: s for s in compare_stored(healthy, fragmented).slis}
    assert (slis["ttft"].base, slis["ttft"].new) == (healthy["slis"]["ttft_ms"], fragmented["slis"]["ttft_ms"])
    assert slis["gpu_busy_pct"].new == fragmented["slis"]["gpu_busy_pct"]


def test_a_report_stored_before_slis_says_why_ttft_is_missing(healthy, fragmented):
    older = {k: v for k, v in healthy.items() if k != "slis"}
    diff = compare_stored(older, fragmented)
    ttft = {s.name: s for s in diff.slis}["ttft"]
    assert ttft.base is None and "needs the trace's events" in ttft.note
    assert diff.kernels, "the kernel rows still come from both reports' breakdowns"
