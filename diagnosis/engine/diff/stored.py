"""The diff of two stored reports (the web page and the API): `diagnosis.engine.diff.compare` on the
report dicts alone. Time to first token and GPU busy come from the report's `slis`, the kernel
table from its HTA kernel breakdowns.

A report stored before it had `slis` gives no TTFT or GPU busy: those stay missing ("n/a", with
the reason) exactly as for a side the CLI could not measure.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from diagnosis.engine.diff import ReportDiff, compare
from diagnosis.engine.trace_figures import TOP_KERNELS, KernelTime, TraceFigures


def kernel_figures(report: dict) -> TraceFigures | None:
    """The report's top kernels summed over its devices (figures with only `top_kernels` set);
    None when the report has no kernel breakdown."""
    per_device = report.get("breakdowns", {}).get("kernels", [])
    if not per_device:
        return None
    total_ns: dict[str, int] = defaultdict(int)
    calls: dict[str, int] = defaultdict(int)
    for device in per_device:
        for kernel in device["top"]:
            total_ns[kernel["name"]] += kernel["total_ns"]
            calls[kernel["name"]] += kernel["count"]
    top = sorted(total_ns, key=lambda name: (-total_ns[name], -calls[name]))[:TOP_KERNELS]
    kernels = tuple(KernelTime(name=name, total_ms=round(total_ns[name] / 1e6, 3), calls=calls[name]) for name in top)
    return TraceFigures(gpu_busy_pct=None, ttft_ms=None, top_kernels=kernels)


def stored_figures(report: dict) -> TraceFigures | None:
    """The figures a stored report carries; None for one stored before `slis` existed."""
    slis = report.get("slis")
    if not isinstance(slis, dict):
        return None
    kernels = kernel_figures(report)
    return TraceFigures(gpu_busy_pct=slis.get("gpu_busy_pct"), ttft_ms=slis.get("ttft_ms"),
                        top_kernels=kernels.top_kernels if kernels else ())


def compare_stored(base: dict, new: dict, *, fail_on: str = "error",
                   fail_on_regression_pct: float | None = None) -> ReportDiff:
    figures = (stored_figures(base), stored_figures(new))
    diff = compare(base, new, *figures, fail_on=fail_on, fail_on_regression_pct=fail_on_regression_pct)
    if all(figures):
        return diff
    # an older report: its TTFT / GPU busy say "needs the trace's events" (no figures), while
    # the kernel rows still come from both breakdowns
    kernels = compare(base, new, kernel_figures(base), kernel_figures(new), fail_on=fail_on,
                      fail_on_regression_pct=fail_on_regression_pct).kernels
    return replace(diff, kernels=kernels)
