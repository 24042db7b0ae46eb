"""Issue 33: every refusal of the input reads '<file>: <where>: expected <what>; got <found>'.

Real files from the shared corpus are cut short, damaged or handed to the wrong parser
explicitly (no detection: the parser must refuse them itself), and every parser gets an empty
file, a binary blob and a 10 MB single-line file. Each refusal must name the file and where
(a line, a byte offset, a table or key), say what was expected and what was got, and keep the
'got' part bounded (an excerpt or a finding, never the input itself)."""
from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from ingest.engine.events import MAX_GOT, EventSink, ParseError, ParseReport
from ingest.engine.parse import InternalParseError, run_parser
from ingest.engine.parsers import PARSERS, _load, detect

# the generic log parser takes any text (it is the fallback): it refuses nothing
REFUSING = [name for name in PARSERS if name != "logs.parser"]
SHAPE = re.compile(r"^(?P<name>[^:]+): (?P<where>.+?): expected (?P<expected>.+?); got (?P<got>.+)$", re.S)
# where a refusal points: a line, a byte offset (compressed, decompressed), or a named place
WHERE = re.compile(r"\b(line [\d,]+|byte [\d,]+|table \w+|SQLite header|top level|top-level object|key '\w+'|"
                   r"resourceSpans\[\d+\][\w.\[\]]*|record \d+)")
POSITION = re.compile(r"\b(line [\d,]+|byte [\d,]+)")


def refusal(parser_name: str, path: Path, name: str) -> ParseError:
    """The ParseError the parser raises for `path`, called explicitly as the pipeline calls it."""
    parser = _load(parser_name)
    sink = EventSink("artifact", parser.SOURCE, lambda batch: None)
    with pytest.raises(ParseError) as err:
        run_parser(parser, path, sink, ParseReport(format=parser.FORMAT), name)
    assert not isinstance(err.value, InternalParseError), str(err.value)
    return err.value


def assert_refusal(error: ParseError, name: str, position: bool = False) -> dict[str, str]:
    message = str(error)
    m = SHAPE.match(message)
    assert m, message
    assert m["name"] == name, message
    assert WHERE.search(m["where"]), message
    if position:
        assert POSITION.search(m["where"]), message
    assert 0 < len(m["got"]) <= MAX_GOT, message
    assert error.got is not None and m["got"] == error.got[:MAX_GOT]
    return m.groupdict()


def _cut(fraction: float):
    def damage(data: bytes) -> bytes:
        return data[:int(len(data) * fraction)]
    return damage


def _gunzip_cut(fraction: float):
    def damage(data: bytes) -> bytes:
        text = gzip.decompress(data)
        return text[:int(len(text) * fraction)]
    return damage


def _first_line(data: bytes) -> bytes:
    return data.split(b"\n", 1)[0] + b"\n"


def _through_header(data: bytes) -> bytes:
    """An ncu CSV cut right after its header line (its preamble kept): no units row follows."""
    head, _, _ = data.partition(b'\n"ID",')
    return head + b'\n"ID",' + data[len(head) + 6:].split(b"\n", 1)[0] + b"\n"


def _as_is(data: bytes) -> bytes:
    return data


# (parser, corpus file, damage, what the 'got' part must say)
REAL_CASES = [
    ("kineto.trace", "h200/oom_fragmentation/kineto_trace.json.gz", _cut(0.5), r"truncated gzip stream"),
    ("kineto.trace", "h200/oom_fragmentation/kineto_trace.json.gz", _gunzip_cut(0.6), r"the end of the data"),
    ("otlp.json_file", "public/otlp/otelproto_examples_trace.json", _cut(0.5), r"\(.+\)"),
    ("otlp.json_file", "public/otlp/otlp2parquet_invalid_trace_invalid_base64.json", _as_is, r"'.+'"),
    ("otlp.protobuf", "public/otlp/otlp2parquet_traces.pb", _cut(0.001), r"truncated"),
    ("pytorch.memory_snapshot", "h200/oom_fragmentation/memory_snapshot.pickle", _cut(0.5), r"."),
    ("pytorch.memory_stats", "h200/oom_fragmentation/memory_stats.json", _cut(0.5), r"end of the data"),
    ("pytorch.memory_timeline", "public/memory_snapshot/hta_memory_timeline.raw.gz", _gunzip_cut(0.5), r"."),
    ("pytorch.flight_recorder", "h200/oom_fragmentation/memory_stats.json", _as_is, r"an object with keys '"),
    ("nsys.sqlite", "public/nsys/pipit_saxpy-mpi-cuda_nsys_perlmutter0.sqlite", _cut(0.001), r"."),
    ("nsys.sqlite", "public/otlp/otelproto_examples_trace.json", _as_is, r"\(file is not a database\)"),
    ("nsys.report_files", "public/logs/cuda_oom_framepack_369.log", _as_is, r"'.+'"),
    ("nvml.jsonl", "public/logs/nccl_watchdog_timeout_basicsr_737.log", _as_is, r"no such line \(line \d+: '"),
    ("pytorch.token_latency", "public/nvml/superbench_monitor_nvml_8gpu.jsonl", _as_is, r"no such line \(line 1: '\{"),
    ("logs.nccl_ras_json", "public/otlp/otelproto_examples_logs.json", _as_is, r"no 'communicators' key"),
    ("nvidia_smi.q_xml", "h200/nvml/nvidia-smi-q.txt", _as_is, r"malformed XML"),
    ("ncu.csv_export", "h200/ncu/ncu_raw.csv", _through_header, r"the end of the file"),
    ("ncu.csv_export", "h200/nvml/nvidia-smi-q.txt", _as_is, r"no such line \(line \d+: '"),
    ("nvidia_smi.query_csv", "h200/nvml/nvidia-smi-query.csv", _first_line, r"no row"),
    ("nvidia_smi.compute_apps", "h200/nvml/nvidia-smi-dmon.txt", _as_is, r"line 1: '"),
    ("nvidia_smi.pmon", "h200/nvml/nvidia-smi-dmon.txt", _as_is, r"no such line \(line 1: '#Time +gpu"),
    ("nvidia_smi.dmon", "h200/nvml/nvidia-smi.txt", _as_is, r"no such line \(line 1: '"),
    ("nvidia_smi.q", "h200/nvml/nvidia-smi-dmon.txt", _as_is, r"no such line \(line 1: '"),
    ("dcgm.exporter", "public/nvml/gpu_glasses_nvidia_smi_8gpu_idle.csv", _as_is, r"no such line \(line 1: '"),
    ("perf.script", "cpu/tokenizer_threads.bpftrace.txt", _as_is, r"no such line \(line \d+: \"ERROR"),
    ("perf.trace", "cpu/tokenizer_hotspot.perf-script.txt", _as_is, r"no such line \(line \d+: '"),
    ("perf.bpftrace", "cpu/tokenizer_threads.perf-trace.txt", _as_is, r"no such line \(line \d+: '"),
]


@pytest.mark.parametrize("parser_name, source, damage, got", REAL_CASES,
                         ids=[f"{c[0]}-{Path(c[1]).name}-{c[2].__qualname__.split('.')[0]}" for c in REAL_CASES])
def test_a_real_file_cut_damaged_or_misread_is_refused_in_shape(parser_name, source, damage, got,
                                                              corpus_dir, tmp_path):
    original = corpus_dir / source
    name = "bad-" + original.name
    path = tmp_path / name
    path.write_bytes(damage(original.read_bytes()))
    parts = assert_refusal(refusal(parser_name, path, name), name)
    assert re.search(got, parts["got"]), str(parts)


def test_every_refusing_parser_is_covered_by_a_real_file():
    assert {case[0] for case in REAL_CASES} == set(REFUSING)


BLOB = bytes(range(256)) * 64


@pytest.mark.parametrize("parser_name", REFUSING)
def test_empty_binary_and_huge_single_line_inputs(parser_name, tmp_path):
    for name, data in (("empty.txt", b""), ("blob.bin", BLOB), ("line.txt", b"x" * 10_000_000)):
        path = tmp_path / name
        path.write_bytes(data)
        parts = assert_refusal(refusal(parser_name, path, name), name)
        if name == "line.txt":  # the 10 MB line shows as an excerpt or a finding: never itself
            assert "x" * 50 not in parts["got"], parts["got"]
            assert len(str(parts)) < 1000


@pytest.mark.parametrize("parser_name", [n for n in REFUSING if n.split(".")[0] in
                                         ("nvml", "dcgm", "perf", "nvidia_smi", "ncu")
                                         or n == "pytorch.token_latency"])
def test_a_text_format_names_the_line(parser_name, tmp_path):
    path = tmp_path / "other.log"
    path.write_bytes(b"\n\n" + b"y" * 10_000_000 + b"\nsecond line\n")
    parts = assert_refusal(refusal(parser_name, path, path.name), path.name, position=True)
    assert "y" * 50 not in parts["got"]


@pytest.mark.parametrize("data, got", [
    (b"", "an empty file"),
    (BLOB, r"binary data no parser recognises \(b'\\x00\\x01"),
    (b"\x00z" * 5_000_000, r"binary data no parser recognises \(b'\\x00z\\x00z"),  # 10 MB, no newline
    (b'{"unknown": 1, "kind": 2}', r"a JSON document of an unknown kind \(keys: unknown, kind\)"),
], ids=["empty", "binary", "10MB-line", "unknown-json"])
def test_detection_refuses_in_shape(data, got, tmp_path):
    path = tmp_path / "stored-name"
    path.write_bytes(data)
    with pytest.raises(ParseError) as err:
        detect(path, "upload.bin")
    parts = assert_refusal(err.value, "upload.bin", position=True)
    assert re.search(got, parts["got"]), parts["got"]
