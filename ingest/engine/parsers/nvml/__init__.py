"""NVML samples as JSON lines, as the tracedoc agent writes them (jsonl)."""
