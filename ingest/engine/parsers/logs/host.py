"""Host work per training step as logs print it: a training framework's own check that a per-batch
callback is slower than the batch (Keras / tf.keras, every wording since 2015), and a torch.profiler
`key_averages().table()` pasted into a log whose DataLoader row holds a large share of the profiled
CPU time. Both say the same thing an expert reads from a trace: the host spends more time per step
than the device work it feeds, so the GPU waits on the host.

The events carry the numbers (callback and batch time, the loader's share); the rules decide
(rules/builtin/host.yaml). Patterns are fixed (ours) and bounded.
"""
from __future__ import annotations

import math
import re

Hit = tuple[str, str, dict, str, float]

# --- Keras: a callback slower than the batch ---------------------------------------------------------
# tf.keras >= 2.2: "Callback method `on_train_batch_end` is slow compared to the batch time (batch time:
# 0.0013s vs `on_train_batch_end` time: 0.0047s). Check your callbacks." (2.2/2.3: "Callbacks method");
# printed when the hook's time exceeds the batch time.
_MEASURED = re.compile(r"Callbacks? method `(\w{1,60})` is slow compared to the batch time \(batch time: ?"
                       r"(\d{1,6}(?:\.\d{1,9})?)s vs `\w{1,60}` time: ?(\d{1,6}(?:\.\d{1,9})?)s\)")
# Keras 1.x - tf.keras 2.1: "Method (on_train_batch_end) is slow compared to the batch update (0.112000)."
# (Keras 1: "Method on_batch_end() is slow ..."): the hook's median time, printed when it exceeds 0.95x the
# batch update and 0.1 s (keras/callbacks.py, CallbackList._call_batch_hook)
_MEDIAN = re.compile(r"Method \(?(\w{1,60})(?:\(\))?\)? is slow compared to the batch update \((\d{1,6}(?:\.\d{1,9})?)\)")
KERAS_MEDIAN_BOUND = 0.95  # the older check: hook median > 0.95 x batch update time

HOST_WORDS = ("is slow compared to the batch",)  # the prefilter's words for slow_callback


def slow_callback(body: str) -> Hit | None:
    m = _MEASURED.search(body)
    if m:
        hook, batch_s, hook_s = m.group(1), float(m.group(2)), float(m.group(3))
        ratio = hook_s / batch_s if batch_s > 0 else math.inf
        return "log", "SlowTrainingCallback", {
            "framework": "keras", "hook": hook, "callback_s": hook_s, "batch_s": batch_s, "measured": True,
            "ratio": round(ratio, 2) if math.isfinite(ratio) else None,
            "detail": f"`{hook}` took {hook_s:g} s against a batch time of {batch_s:g} s"
                      + (f" ({ratio:.1f}x the batch)" if math.isfinite(ratio) else "")}, "warning", ratio
    m = _MEDIAN.search(body)
    if m:
        hook, hook_s = m.group(1), float(m.group(2))
        return "log", "SlowTrainingCallback", {
            "framework": "keras", "hook": hook, "callback_s": hook_s, "batch_s": None, "measured": False,
            "ratio": None, "ratio_at_least": KERAS_MEDIAN_BOUND,
            "detail": f"`{hook}` took {hook_s:g} s (its median), which Keras reports only when it exceeds "
                      f"{KERAS_MEDIAN_BOUND:g}x the batch update time"}, "warning", math.nan
    return None


# --- torch.profiler key_averages table --------------------------------------------------------------
# Header: "Name  Self CPU %  Self CPU  CPU total %  CPU total  CPU time avg  [Self CUDA ...]  # of Calls"
# (torch <= 1.7: "Self CPU total %", "Number of Calls"); columns are separated by two or more spaces.
_COLUMNS = re.compile(r" {2,}")
_DASHES = re.compile(r"^-{10,}(?: {2}-{3,}){0,40}\s*$")
# the DataLoader's own record_function ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
# cut to "..." by the table) and Lightning's profiler action for the next batch
_LOADER = re.compile(r"^enumerate\(DataLoader\)#|DataLoaderIter\b|\.train_dataloader_n(?:ext\b|\.\.\.)")
_PCT = re.compile(r"^(-?\d{1,3}(?:\.\d{1,4})?)%$")
_TIME = re.compile(r"^(\d{1,9}(?:\.\d{1,6})?)(us|ms|s)$")
_SCALE = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
MAX_COLUMNS = 40


def _seconds(text: str | None) -> float | None:
    m = _TIME.match(text or "")
    return float(m.group(1)) * _SCALE[m.group(2)] if m else None


class ProfilerTable:
    """Reads a pasted key_averages table line by line: its header names the columns; the first
    DataLoader row of each table becomes one event whose value is the loader's share of the
    profiled CPU time (its "CPU total %")."""

    def __init__(self) -> None:
        self.columns: list[str] = []
        self.reported = False

    def feed(self, body: str) -> Hit | None:
        text = body.strip()
        if "CPU total %" in text and text.startswith("Name"):
            cols = _COLUMNS.split(text)
            self.columns, self.reported = (cols, False) if len(cols) <= MAX_COLUMNS else ([], False)
            return None
        if not self.columns or _DASHES.match(text):
            return None
        cells = _COLUMNS.split(text)
        if len(cells) != len(self.columns):
            self.columns = []  # the table ended (its totals or any other line)
            return None
        row = dict(zip(self.columns, cells))
        name = cells[0]
        share = _PCT.match(row.get("CPU total %", ""))
        if self.reported or not share or not _LOADER.search(name):
            return None
        self.reported = True
        calls = row.get("# of Calls") or row.get("Number of Calls") or ""
        total_s = _seconds(row.get("CPU total"))
        n = int(calls) if calls.isdigit() else None
        pct = float(share.group(1))
        per_call_ms = round(total_s / n * 1000, 1) if total_s is not None and n else None
        return "log", "ProfilerDataLoaderShare", {
            "row": name[:120], "cpu_total_pct": pct, "cpu_total": row.get("CPU total", ""), "cpu_total_s": total_s,
            "calls": n, "per_call_ms": per_call_ms,
            "detail": f"`{name[:120]}` holds {pct:g}% of the profiled CPU time ({row.get('CPU total', '?')}"
                      + (f" over {n} calls, {per_call_ms:g} ms each" if per_call_ms is not None else "") + ")"}, \
            "warning", pct
