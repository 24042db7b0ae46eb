"""Rendering a report and choosing the exit status: shared by `diagnose` and `submit`."""
from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import TYPE_CHECKING

from rules.engine.severity import at_least

if TYPE_CHECKING:  # the report types pull in the engine: loaded by the commands that diagnose
    from diagnosis.engine.results import Report

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT = 0, 1, 2
# what `--format` offers (diagnosis.engine.render.RENDERERS renders each); listed here so that the
# argument parsers do not import the renderers
FORMATS = ("text", "json", "junit", "sarif", "markdown")
# 3 an internal error: tracedoc itself failed (a bug), whatever the findings. Never 1, so CI
# does not read a crash as "findings".
EXIT_INTERNAL = 3


def run(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    """Parse `argv` and run the command it names (each sub-parser sets `func`); its exit status."""
    args = parser.parse_args(argv)
    return args.func(args)


def internal_error(e: Exception) -> int:
    """Say that tracedoc failed (no traceback unless TRACEDOC_DEBUG is set); the exit status."""
    if os.environ.get("TRACEDOC_DEBUG"):
        traceback.print_exc()
    print(f"tracedoc: internal error: {type(e).__name__}: {e} (a tracedoc bug, not a problem with "
          "the input; set TRACEDOC_DEBUG=1 for the traceback)", file=sys.stderr)
    return EXIT_INTERNAL


def print_report(report: Report, fmt: str, fail_on: str, web_url: str | None = None) -> int:
    """Render the report on stdout (with the trace's web page when it came from a server),
    name unusable files on stderr; return the exit status: 2 when no file was usable, 1 with a
    finding at or above `fail_on`, else 0."""
    from diagnosis.engine.render import RENDERERS, RenderOptions  # only once there is a report to render

    artifacts = report.trace.artifacts
    unusable = [a for a in artifacts if a.format == "unknown"]
    for a in unusable:
        print(f"tracedoc: {a.warnings[-1] if a.warnings else a.path + ': format not recognised'}",
              file=sys.stderr)
    out = RENDERERS[fmt](report, RenderOptions(fail_on=fail_on, web_url=web_url))
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    if unusable and len(unusable) == len(artifacts):
        return EXIT_BAD_INPUT
    if any(at_least(f.severity, fail_on) for f in report.findings):
        return EXIT_FINDINGS
    return EXIT_OK
