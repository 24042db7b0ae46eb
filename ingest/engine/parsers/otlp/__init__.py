"""OpenTelemetry (OTLP) traces, logs and metrics: JSON (json_file) and protobuf (protobuf),
read into rows by one emitter (common)."""
