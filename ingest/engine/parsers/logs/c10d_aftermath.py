"""What ProcessGroupNCCL prints after its watchdog caught a timeout, when the timeout line itself is
not in the excerpt, and c10d records a terminal or a test runner wrapped at a record's first words.

- "Failed to retrieve [TORCH_]NCCL_DESYNC_DEBUG report. Please file an issue. Error: ..." : the
  watchdog builds the desync report only after a collective timed out (TORCH_NCCL_DESYNC_DEBUG=1),
  so the failure to build it still says that one did; the error often names the rank and the
  collective ("Timeout rank [0] ... col = RECV").
- "Stack trace of the failed collective:" : the flight recorder prints the Python stack of the
  collective the watchdog found failed or timed out; its "#0 <op> from ..." frame names the call.

Both are read as a sign of a timeout whose record is missing (rules.engine.features.nccl teardown rows).

Wrapping: a record cut right after its first words ("[Rank 0] Watchdog" / "caught collective
operation timeout: ...") is incomplete until the next line completes its opening phrase; the join
is taken only when it does. Patterns are fixed (ours) and bounded.
"""
from __future__ import annotations

import re

from ingest.engine.parsers.logs.nccl import join_wrapped, record_incomplete

Hit = tuple[str, str, dict, str]

# a few lines: enough for an 80-column paste of a c10d record and its error text
MAX_WRAP_LINES = 6

# record openings a wrap may cut after their first word(s) (at a space)
_OPENINGS = ("Watchdog caught collective operation timeout", "failure detected by watchdog at work",
             "Exception (either an error or timeout) detected by watchdog at work",
             "Failed to retrieve NCCL_DESYNC_DEBUG report", "Failed to retrieve TORCH_NCCL_DESYNC_DEBUG report")
_MIN_CUT = 8  # "Watchdog", "Failed to": a cut shorter than a word or two is not evidence

_DESYNC_FAILED = re.compile(r"Failed to retrieve (?:TORCH_)?NCCL[_ ](?:DESYNC_DEBUG|desync) report")
# the report's error text, as far as a wrap lets it through: the record is whole once the error says
# which rank and collective it was on, or after MAX_WRAP_LINES
_DESYNC_TAIL = re.compile(r"\bcol ?= ?\w{2,40}")
_TIMEOUT_RANK = re.compile(r"Timeout rank \[(\d{1,7})\]")
_COLLECTIVE = re.compile(r"\bcol ?= ?([A-Za-z_]{2,40})")
_FAILED_STACK = "Stack trace of the failed collective"
_RANK_TAG = re.compile(r"^\[rank(\d{1,7})\W{0,3}:")   # torch's "[rankN]:", also mangled ("[rank3[]:")
FRAME_ZERO = re.compile(r"^\s{0,8}#0 ([\w.]{1,80}) from ")

AFTERMATH_WORDS = ("desync_debug report", "desync report", "stack trace of the failed collective")  # the prefilter's words


def _cut_opening(text: str) -> str:
    """The opening phrase `text` ends with the first words of, or ""."""
    tail = text.rstrip()
    for opening in _OPENINGS:
        for k in range(len(opening) - 1, _MIN_CUT - 1, -1):
            if opening[k] == " " and tail.endswith(opening[:k]) and (
                    len(tail) == k or not tail[-k - 1].isalnum()):
                return opening
    return ""


def incomplete(text: str) -> bool:
    """A c10d/NCCL record whose required tail is not in `text` yet (logs.nccl), or one cut right after
    its opening words, or a desync-report failure before its error names the collective."""
    if record_incomplete(text):
        return True
    if _DESYNC_FAILED.search(text):
        return not _DESYNC_TAIL.search(text)
    return bool(_cut_opening(text))


def continues(head: str, tail: str, joined: str) -> bool:
    """An unprefixed line continues a record cut at its opening words only when the join restores
    the whole opening phrase; any other open record takes it as before."""
    opening = _cut_opening(head)
    return not opening or opening in joined


# words of a record that a logger's wrap at a space would glue ("ran for" / "10028 milliseconds")
_SPACED = re.compile(r"\bran for \d|\d milliseconds\b|\bTimeout rank \[")


def join(head: str, tail: str) -> str:
    """logs.nccl's join, except that the space a wrap took is given back where it restores the
    record's opening phrase or one of its figures' words."""
    if head.endswith(" ") or tail.startswith(" "):
        return head + tail
    spaced, tight = f"{head} {tail}", head + tail
    opening = _cut_opening(head)
    if (opening and opening in spaced) or len(_SPACED.findall(spaced)) > len(_SPACED.findall(tight)):
        return spaced
    return join_wrapped(head, tail)


def timeout_aftermath(body: str) -> Hit | None:
    m = _DESYNC_FAILED.search(body)
    if m:
        rank, col = _TIMEOUT_RANK.search(body), _COLLECTIVE.search(body)
        attrs: dict = {"evidence": "desync_report_failed", "op": col.group(1).upper() if col else None,
                       "rank_in_message": int(rank.group(1)) if rank else None,
                       "said": "the desync debug report, which the watchdog builds only after a collective timed out, "
                               "failed" + (f" (it was on rank {rank.group(1)}" if rank else "")
                               + ((", " if rank else " (") + f"collective {col.group(1)})" if col else
                                  (")" if rank else ""))}
        return "log", "NCCLDesyncReportFailed", attrs, "warning"
    at = body.find(_FAILED_STACK)
    if at >= 0:
        tag = _RANK_TAG.match(body.lstrip())
        # with the flight recorder off: "Stack trace of the failed collective not found, potentially because
        # FlightRecorder is disabled" -- printed on the same failure, without the stack
        missing = body[at + len(_FAILED_STACK):at + len(_FAILED_STACK) + 12].lstrip().startswith("not found")
        return "log", "NCCLFailedCollectiveStack", {
            "evidence": "failed_collective_stack", "op": None, "stack_printed": not missing,
            "rank_in_message": int(tag.group(1)) if tag else None,
            "said": "the watchdog looked up the stack of the failed collective, which it does only when it finds a "
                    "collective failed or timed out (the flight recorder was off, so no stack was printed)" if missing
                    else "the flight recorder printed the stack of the failed collective, which the watchdog prints "
                         "when it finds a collective failed or timed out"}, "warning"
    return None
