"""DCGM: dcgm-exporter's Prometheus text and counter configuration CSV (exporter)."""
