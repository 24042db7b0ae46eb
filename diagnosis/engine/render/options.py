"""What every rendering of a report may need beside the report: the severity that fails a
CI job and the web page of the trace (set when the report came from a server)."""
from __future__ import annotations

from dataclasses import dataclass

SARIF_LEVEL = {"info": "note", "warning": "warning", "error": "error", "critical": "error"}


@dataclass(frozen=True)
class RenderOptions:
    fail_on: str = "error"
    web_url: str | None = None
