"""An out-of-memory the program itself retries is not (yet) its failure.

llama.cpp's "compute buffer allocation failed, retrying without pipeline parallelism", a loader
that halves its batch, an engine that retries a smaller pool: the allocation failed, the program
said on one of the next lines that it retries another way, and went on. The OOM is held for a few
lines; a retry notice turns it into an informational event; anything else (the window passing,
another OOM, the end of the file) lets it out as the failure it is. An OOM after the retry is held
again, so a retry that fails as well is still reported.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ingest.engine.parsers.logs.lines import LineHit

WINDOW_LINES = 6     # the retry notice follows the failed allocation's own few lines
RETRY_NOTICE = re.compile(r"\bretrying\b|\bwill retry\b|\bretry(?:ing)? (?:with|without)\b", re.I)
# the allocator's own word that its caller falls back and goes on (TF/XLA BFC: "The caller indicates
# that this is not a failure"): a wrapped message can put it on a line below "ran out of memory"
CALLER_TOLERATES = re.compile(r"\bindicates that this is not a failure\b", re.I)


@dataclass
class HeldOOM:
    lines: list
    finding: LineHit

    def expired(self, line_no: int) -> bool:
        return line_no - self.lines[-1].no > WINDOW_LINES

    def retried(self, notice: str) -> LineHit:
        attrs = dict(self.finding.attrs) | {"retried": notice.strip()[:240]}
        return LineHit("log", "OutOfMemoryRetried", attrs, "info", self.finding.value, self.finding.unit)
