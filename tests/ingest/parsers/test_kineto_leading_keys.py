"""A Kineto trace whose top-level object opens with keys larger than the detection head (a big
`metadata` a job adds, many devices' properties) is still a Kineto trace: detection reads on to
`traceEvents` as the parser does, instead of refusing an "unknown JSON document" (issue 33). The
traces are the corpus's real h200/healthy_decode trace with a leading key added at run time."""
from __future__ import annotations

import gzip
import json

import pytest

from ingest.engine.io import HEAD_BYTES

LEADING = {"layer_%d" % i: {"shape": [4096, 4096], "dtype": "float16", "note": "x" * 64} for i in range(1500)}


@pytest.fixture(scope="module")
def trace(corpus_dir):
    with gzip.open(corpus_dir / "h200" / "healthy_decode" / "kineto_trace.json.gz") as f:
        return json.load(f)


def _write(tmp_path, doc: dict, name: str = "trace.json", compress: bool = False):
    text = json.dumps(doc).encode()
    assert text.index(b'"traceEvents"') > HEAD_BYTES  # the key is past what detection sees first
    path = tmp_path / (name + (".gz" if compress else ""))
    path.write_bytes(gzip.compress(text) if compress else text)
    return path


def _events(parse, path):
    result, df = parse(path)
    assert result.format == "kineto" and not result.error, result.error
    return df


@pytest.mark.parametrize("compress", [False, True])
def test_big_metadata_first(parse, tmp_path, trace, compress):
    plain = _events(parse, _small(tmp_path, trace))
    big = _events(parse, _write(tmp_path, {"metadata": LEADING, **trace}, compress=compress))
    assert len(big) == len(plain) and (big.kind == "kernel").sum() == (plain.kind == "kernel").sum() > 0


def _small(tmp_path, trace):
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(trace))
    return path


def test_big_key_after_schema_version(parse, tmp_path, trace):
    doc = {"schemaVersion": trace["schemaVersion"], "distributedInfo": {"ranks": LEADING}, **trace}
    assert _events(parse, _write(tmp_path, doc)).kind.eq("kernel").any()


def test_trace_events_text_inside_a_leading_value_is_not_the_key(parse, tmp_path, trace):
    doc = {"metadata": {"comment": '"traceEvents": [ is how the array opens', **LEADING}, **trace}
    assert _events(parse, _write(tmp_path, doc)).kind.eq("kernel").any()


def test_a_big_document_without_trace_events_is_still_refused(parse, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"metadata": LEADING, "schemaVersion": 1, "other": []}))
    result, _ = parse(path)
    assert "expected a known trace format; got a JSON document of an unknown kind" in result.error
