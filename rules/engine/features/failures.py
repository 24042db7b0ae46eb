"""The floor under every rule: failures that the input shows and no rule explains.

`unexplained_failures` lists every row a person would read as a failure: an error or oom event
(a traceback's final exception, a CUDA/HIP/NCCL/XLA/driver error the log parsers recognised)
and a log line its logger printed at error or critical level. The `unexplained.failure` rule
turns them into a warning; any other finding at warning or above on the same scope suppresses
it (diagnosis.engine.clusters.apply_suppressions), so it is seen only where nothing else explains the
failure: a crashed job never reads "no findings".

Each row carries a fingerprint of its normalised message (numbers, addresses, hex ids, paths,
quoted names and times folded), so the same unexplained failure clusters across traces as an
issue in an error tracker does, and a team can write the rule for it from the cluster page.
"""
from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pandas as pd

from ingest.engine.trace_frame import as_event_frame, in_values, parse_attrs
from rules.engine.features import feature

FAILURE_KINDS = ("error", "oom")
FAILURE_LEVELS = ("error", "critical")
CONSEQUENCES = ("ProcessCrashed",)  # logs.lines: the shell's notice that the process died
# error-level lines that are not failures: registration races of TF/XLA's plugin factories at
# import, NUMA probes, retried stream-executor allocations, an echo kept as a repeat
BENIGN = re.compile(r"Unable to register cu(?:DNN|FFT|BLAS) factory|could not open file to read NUMA node|"
                    r"from device: CUDA_ERROR_OUT_OF_MEMORY|The caller indicates that this is not a failure|"
                    r"oneDNN custom operations are on|TF-TRT Warning", re.I)
_FOLD = (
    (re.compile(r"\x1b\[[0-9;]*[A-Za-z]"), ""),
    (re.compile(r"^\s*(?:\[[^\]]{0,80}\]\s*|\([^)]{0,80}\)\s*){0,4}"), ""),      # bracketed envelopes
    (re.compile(r"(?:[A-Za-z]:)?(?:[\w.~-]{0,80}/){1,40}([\w.-]{1,120})"), r"\1"),  # paths -> file name
    (re.compile(r"0x[0-9a-fA-F]{1,32}"), "<hex>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"\d{1,40}(?:[.:]\d{1,40}){0,6}"), "<n>"),
    (re.compile(r"'[^'\n]{0,200}'|\"[^\"\n]{0,200}\""), "<str>"),
    (re.compile(r"\s{1,200}"), " "),
)


def normalise(message: str) -> str:
    """The message with what varies between occurrences folded: numbers, hex, paths, quoted names."""
    text = message.strip()[:600]
    for rx, repl in _FOLD:
        text = rx.sub(repl, text)
    return text.strip()[:300]


def fingerprint(message: str) -> str:
    return hashlib.sha1(normalise(message).encode()).hexdigest()[:16]


def _message(name: str, attrs: dict) -> str:
    """The failure in one line: the exception and its message, else the line itself."""
    text = attrs.get("message") or attrs.get("exception_message") or ""
    if not text:
        lines = [l for l in str(attrs.get("text") or "").splitlines() if l.strip()]
        text = lines[-1] if lines else name
        if attrs.get("exception") and lines:  # a traceback: the exception line, not the last frame
            text = next((l for l in reversed(lines) if str(attrs["exception"]) in l), text)
    return str(text).strip()[:500]


@feature("unexplained_failures", doc="every failure the input shows (error/oom events; log lines at error or "
         "critical level, benign registration/NUMA/retry lines left out), one row each: attrs.message (the "
         "failure in one line), attrs.fingerprint (16 hex digits of its normalised message: numbers, paths, "
         "hex ids and quoted names folded), attrs.normalised. The unexplained.failure rule is suppressed by any "
         "other finding at warning or above on the same scope.")
def unexplained_failures(ctx) -> pd.DataFrame:
    ev = ctx.events
    if ev.empty:
        return as_event_frame(None)
    mask = in_values(ev["kind"], FAILURE_KINDS) | (in_values(ev["kind"], ("log",))
                                                   & in_values(ev["severity"], FAILURE_LEVELS))
    rows = ev[mask]
    if rows.empty:
        return as_event_frame(None)
    keep, attrs_out = [], []
    for i, (name, raw) in enumerate(zip(rows["name"].astype(str), rows["attrs"])):
        attrs = parse_attrs(raw)
        if attrs.get("repeat_of"):
            continue  # an echo of a line already listed
        message = _message(name, attrs)
        if BENIGN.search(message) or BENIGN.search(str(attrs.get("text") or "")[:2000]):
            continue
        keep.append(i)
        attrs_out.append(json.dumps({"message": message, "fingerprint": fingerprint(message),
                                     "normalised": normalise(message), "event": name,
                                     "text": str(attrs.get("text") or message)[:2000]}))
    if not keep:
        return as_event_frame(None)
    # the shell's crash notice ("Aborted (core dumped)") after a failure the file states is that
    # failure's consequence, not a second one
    names = rows["name"].astype(str).to_numpy()
    arts = rows["artifact"].astype(str).to_numpy()
    stated = {arts[i] for i in keep if names[i] not in CONSEQUENCES}
    kept = [(i, a) for i, a in zip(keep, attrs_out) if not (names[i] in CONSEQUENCES and arts[i] in stated)]
    keep, attrs_out = [i for i, _ in kept], [a for _, a in kept]
    out = rows.iloc[np.asarray(keep)].reset_index(drop=True).copy()
    out["attrs"] = attrs_out
    return as_event_frame(out)
