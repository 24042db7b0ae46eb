"""Rendering a report and choosing the exit status: shared by `diagnose` and `submit`."""
from __future__ import annotations

import sys

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT = 0, 1, 2


def print_report(report: dict, fmt: str, fail_on: str) -> int:
    """Render the report on stdout, name unusable files on stderr; return the exit status:
    2 when no file was usable, 1 with a finding at or above `fail_on`, else 0."""
    from diagnosis.render import RENDERERS
    from diagnosis.severity import at_least

    artifacts = report["trace"]["artifacts"]
    unusable = [a for a in artifacts if a["format"] == "unknown"]
    for a in unusable:
        print(f"tracedoc: {a['warnings'][-1] if a['warnings'] else a['path'] + ': format not recognised'}",
              file=sys.stderr)
    render = RENDERERS[fmt]
    out = render(report, fail_on) if fmt == "junit" else render(report)
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    if unusable and len(unusable) == len(artifacts):
        return EXIT_BAD_INPUT
    if any(at_least(f["severity"], fail_on) for f in report["findings"]):
        return EXIT_FINDINGS
    return EXIT_OK
