import base64
import gzip
import json

import pytest

from tests.corpus import corpus


def _spans(doc):
    return [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def test_json_and_protobuf_give_the_same_spans(parse):
    doc = json.loads(corpus("h200", "healthy_decode", "otlp_traces.json").read_text())
    spans = _spans(doc)
    rj, dj = parse(corpus("h200", "healthy_decode", "otlp_traces.json"))
    rp, dp = parse(corpus("h200", "healthy_decode", "otlp_traces.pb"))
    assert (rj.format, rp.format) == ("otlp_json", "otlp_pb")
    assert len(dj) == len(dp) == len(spans)
    want = sorted(base64.b64decode(s["spanId"]).hex() for s in spans)
    assert sorted(dj.span_id) == sorted(dp.span_id) == want
    prefill = next(s for s in spans if s["name"] == "prefill")
    row = dp[dp.name == "prefill"].iloc[0]
    assert row.ts == int(prefill["startTimeUnixNano"])
    assert row.dur == int(prefill["endTimeUnixNano"]) - int(prefill["startTimeUnixNano"])
    assert row.trace_id == base64.b64decode(prefill["traceId"]).hex()
    assert row.parent_id == base64.b64decode(prefill["parentSpanId"]).hex()
    assert row.host == "vm"  # host.name wins over service.name
    attrs = json.loads(row["attrs"])
    assert attrs["attributes"]["step"] == 0 and attrs["resource"]["service.name"] == "llm-infer"


def test_hex_ids_are_lowercased_and_events_kept(parse):
    _, df = parse(corpus("public", "otlp", "otelproto_examples_trace.json"))
    assert df.iloc[0].trace_id == "5b8efff798038103d269b633813fc60c"
    assert json.loads(df.iloc[0]["attrs"])["span_kind"] == "server"
    path = corpus("public", "otlp", "otlp2parquet_traces.jsonl")
    docs = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
    spans = [s for d in docs for s in _spans(d)]
    result, df = parse(path)
    assert (df.kind == "span").sum() == len(spans)
    assert (df.kind == "marker").sum() == sum(len(s.get("events", [])) for s in spans)
    r2, d2 = parse(corpus("public", "otlp", "otlp2parquet_traces.pb"))
    assert sorted(d2[d2.kind == "span"].span_id) == sorted(df[df.kind == "span"].span_id)


def test_exception_event_becomes_error(parse, tmp_path):
    doc = json.loads(corpus("public", "otlp", "otelproto_examples_trace.json").read_text())
    span = _spans(doc)[0]
    span["status"] = {"code": 2, "message": "boom"}
    span["events"] = [{"timeUnixNano": "1544712660500000000", "name": "exception", "attributes": [
        {"key": "exception.type", "value": {"stringValue": "torch.OutOfMemoryError"}},
        {"key": "exception.message", "value": {"stringValue": "CUDA out of memory"}}]}]
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(json.dumps(doc).encode()))
    _, df = parse(p)
    err = df[df.kind == "error"].iloc[0]
    assert err["name"] == "torch.OutOfMemoryError" and "CUDA out of memory" in json.loads(err["attrs"])["text"]
    assert df[df.kind == "span"].iloc[0].severity == "error"


def test_logs_and_metrics(parse):
    _, df = parse(corpus("public", "otlp", "otelproto_examples_logs.json"))
    assert df.iloc[0].kind == "log" and df.iloc[0].severity == "info"  # severityNumber 10
    assert json.loads(df.iloc[0]["attrs"])["text"] == "Example log record"
    doc = json.loads(corpus("public", "otlp", "otelproto_examples_metrics.json").read_text())
    metrics = doc["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
    _, df = parse(corpus("public", "otlp", "otelproto_examples_metrics.json"))
    assert sorted(df.name) == sorted(m["name"] for m in metrics)
    hist = json.loads(df[df.name == "my.histogram"].iloc[0]["attrs"])
    assert [b["count"] for b in hist["buckets"]] == [1, 1]


@pytest.mark.parametrize("name, field", [
    ("otlp2parquet_invalid_trace_invalid_base64.json", "resourceSpans[0].scopeSpans[0].spans[0].traceId"),
    ("otlp2parquet_invalid_trace_invalid_kind.json", "resourceSpans[0].scopeSpans[0].spans[0].kind"),
    ("otlp2parquet_invalid_trace_mixed_encoding.json", "resourceSpans[0].scopeSpans[0].spans[0].traceId"),
])
def test_invalid_examples_name_the_field(parse, name, field):
    result, _ = parse(corpus("public", "otlp", name))
    assert result.error.startswith(f"{name}: {field}: ")
    assert "hex" in result.error or "SPAN_KIND_SERVER" in result.error


def test_one_bad_span_is_skipped_not_fatal(parse, tmp_path):
    doc = json.loads(corpus("public", "otlp", "otlp2parquet_trace.json").read_text())
    _spans(doc)[1]["spanId"] = "xyz"
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    result, df = parse(p)
    assert len(df) == 1 and "spans[1].spanId" in result.warnings[0]


def test_truncated_and_corrupted_inputs(parse, tmp_path):
    data = corpus("h200", "healthy_decode", "otlp_traces.json").read_bytes()
    p = tmp_path / "cut.json"
    p.write_bytes(data[: len(data) // 2])
    result, _ = parse(p)
    assert result.error.startswith("cut.json: line ") and "valid JSON" in result.error
    pb = corpus("public", "otlp", "otlp2parquet_traces.pb").read_bytes()
    p = tmp_path / "cut.pb"
    p.write_bytes(pb[: len(pb) - 100])
    result, df = parse(p)
    assert not result.error and len(df) > 0  # complete records before the cut are kept
    assert any("truncated" in w for w in result.warnings)
    p = tmp_path / "first.pb"
    p.write_bytes(pb[:200])
    result, _ = parse(p)
    assert "first.pb: byte 0:" in result.error and "truncated" in result.error
    p = tmp_path / "trunc.json.gz"
    p.write_bytes(gzip.compress(data)[:-40])
    result, _ = parse(p)
    assert result.error.startswith("trunc.json.gz: ") and "gzip" in result.error
