"""The CLI diagnoses the tables it parsed in memory; the service diagnoses the Parquet files
its parse task stored. Both must give the same report, and the in-memory path's progress
must mean something (bytes read, then the diagnosis stages)."""
import gzip
import json

import pytest

from bench.bench_kineto_parse import build_trace
from diagnosis.engine import scenarios
from diagnosis.engine.pipeline import diagnose, load_events, run
from ingest.engine.artifact_results import parse_in_memory, parse_one
from ingest.engine.parse import parse_events
from ingest.engine.progress import DIAGNOSIS_STAGES, PARSE_SHARE, overall_done
from tests.corpus import corpus
from tests.support.memory_maps import in_spill_file

SCENARIOS = [("h200", "cudagraph_abort"), ("h200", "nccl_timeout"), ("h200", "oom_fragmentation"),
             ("h200", "fragmented_decode"), ("cpu", "tokenizer_threads.perf-trace.txt"),
             ("public", "logs", "cuda_oom_framepack_369.log")]


@pytest.mark.parametrize("parts", SCENARIOS, ids=lambda p: "/".join(p))
def test_in_memory_and_parquet_paths_give_the_same_report(parts, corpus_dir):
    path = corpus(*parts)
    in_memory = run([path]).to_dict()
    via_parquet = scenarios.report(path)
    assert json.dumps(in_memory, sort_keys=True, default=str) == json.dumps(via_parquet, sort_keys=True, default=str)


def test_the_same_event_frame_either_way(tmp_path, corpus_dir):
    path = corpus("h200", "cudagraph_abort", "kineto_trace.json.gz")
    memory, _ = load_events([parse_in_memory(path.name, path)])
    stored, _ = load_events([parse_one(path.name, path, tmp_path)])
    assert memory.equals(stored)
    assert memory["ts"].is_monotonic_increasing
    assert str(memory["attrs"].dtype) == "string[pyarrow]"  # no Python object per row


def test_args_read_back_from_the_spill_file_give_the_same_report(tmp_path, monkeypatch, corpus_dir):
    """The CLI's parse and sort write the args (and other text of 1 MiB or more) to an unlinked
    file and map it back (ingest.engine.spill); where no file can be written they stay in memory."""
    path = corpus("h200", "healthy_decode", "kineto_trace.json.gz")
    monkeypatch.setenv("TRACEDOC_SPILL_DIR", str(tmp_path))
    parsed = parse_in_memory(path.name, path).table.column("attrs")
    assert in_spill_file(parsed.chunk(0))
    del parsed
    events, _ = load_events([parse_in_memory(path.name, path)])
    assert in_spill_file(events["attrs"].array._pa_array.chunk(0))
    del events
    spilled = run([path]).to_dict()
    monkeypatch.setenv("TRACEDOC_SPILL_DIR", str(tmp_path / "missing"))
    in_memory = run([path]).to_dict()
    assert json.dumps(spilled, sort_keys=True, default=str) == json.dumps(in_memory, sort_keys=True, default=str)
    assert list(tmp_path.iterdir()) == []


def test_the_layout_libkineto_writes_gives_the_report_compact_json_gives(tmp_path, corpus_dir):
    """Real traces are written on indented lines, white space inside their args too: the
    diagnosis must not depend on it (bench_diagnose's "kineto layout" trace is built the same way)."""
    reports = []
    for layout in (False, True):
        path = tmp_path / str(layout) / "rank0.pt.trace.json"
        path.parent.mkdir()
        build_trace(path, 1, kineto_layout=layout)  # one copy of the corpus trace either way
        reports.append(json.dumps(run([path]).to_dict(), sort_keys=True, default=str))
    assert reports[0] == reports[1]
    assert '"events": 59433' in reports[0]


def test_an_unusable_file_is_contained_in_memory_too(tmp_path):
    bad = tmp_path / "empty.log"
    bad.write_bytes(b"")
    result = parse_in_memory(bad.name, bad)
    assert result.error.startswith("empty.log") and result.table is None


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_parse_progress_reports_bytes_of_the_stored_file(tmp_path, compress, corpus_dir):
    content = gzip.decompress(corpus("h200", "healthy_decode", "kineto_trace.json.gz").read_bytes())
    path = tmp_path / ("trace.json.gz" if compress else "trace.json")
    path.write_bytes(gzip.compress(content) if compress else content)
    seen = []
    parse_events(path, "t", None, lambda batch: None, lambda events, read: seen.append(read))
    assert len(seen) > 2 and seen == sorted(seen)  # moves while it parses, never back
    assert 0 < seen[0] < path.stat().st_size == seen[-1]


def test_diagnosis_stages_are_reported_in_order(corpus_dir):
    path = corpus("h200", "cudagraph_abort", "kineto_trace.json.gz")
    stages = []
    diagnose([parse_in_memory(path.name, path)], on_stage=lambda stage, done: stages.append((stage, done)))
    names = list(dict.fromkeys(s for s, _ in stages))
    assert names == list(DIAGNOSIS_STAGES)
    done = [d for _, d in stages]
    assert done == sorted(done) and done[-1] < 1


def test_overall_progress_splits_parse_and_diagnosis():
    assert overall_done(0, 100) == 0 and overall_done(50, 100) == pytest.approx(PARSE_SHARE / 2)
    assert overall_done(100, 100) == pytest.approx(PARSE_SHARE) == overall_done(100, 100, 0.0)
    assert overall_done(0, 0, 1.0) == 1.0 and overall_done(0, 0) == 0.0


def test_cli_shows_a_progress_bar_on_stderr(capsys, corpus_dir):
    from cli.main import main
    main(["diagnose", "--format", "json", str(corpus("h200", "cudagraph_abort", "kineto_trace.json.gz"))])
    err = capsys.readouterr().err
    assert "parsing kineto_trace.json.gz" in err and "%" in err
