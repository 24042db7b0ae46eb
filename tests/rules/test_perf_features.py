"""The features rules read from perf captures: futex waits per thread, the hottest host
functions per process (their self and inclusive shares), on the corpus's tokenizer captures."""
from rules.engine.features.perf import futex_wait_per_thread, top_host_functions
from tests.corpus import corpus
from tests.ingest.parsers.helpers import parse_result


def test_futex_waits_per_thread(tmp_path, corpus_dir):
    _, df = parse_result(corpus("cpu", "tokenizer_threads.perf-trace.txt"), tmp_path)
    waits = futex_wait_per_thread(df.assign(source="perf"))
    # the 4 tokenizer threads each wait hundreds of ms
    assert (waits.total_ms > 300).sum() >= 4


def test_top_host_functions(tmp_path, corpus_dir):
    _, df = parse_result(corpus("cpu", "tokenizer_hotspot.perf-script.txt"), tmp_path)
    top = top_host_functions(df.assign(source="perf"))
    by_pid = df.groupby("pid").size()
    pid = by_pid.idxmax()
    mine = top[top.pid == pid].sort_values("value", ascending=False)
    leaf_counts = df[df.pid == pid]["name"].value_counts()
    assert mine.iloc[0]["samples"] == leaf_counts.iloc[0]
    assert abs(mine.iloc[0]["value"] - 100 * leaf_counts.iloc[0] / by_pid[pid]) < 1e-9
    assert (mine.inclusive_share >= mine.self_share).all()
    hot = top[top.name.str.contains("sre")]
    assert len(hot) > 0  # the regex engine is hot in the tokenizer threads
