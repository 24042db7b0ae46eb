"""`tracedoc diff BASE NEW`: diagnose two traces in-process and say what the change did.

Exit status, for a CI gate: 0 no regression; 1 a regression (a new finding at or above
--fail-on, or with --fail-on-regression an SLI worse by more than that or an SLO newly
violated); 2 unusable input (either side); 3 an internal error (a tracedoc bug).
"""
from __future__ import annotations

import argparse
import sys

from cli.output import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_INTERNAL, EXIT_OK, internal_error
from rules.engine.severity import SEVERITIES


def regression_pct(text: str) -> float:
    """'5%' or '5' -> 5.0 (percent, not a fraction: '0.05' is 0.05%)."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage like 5%") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r}: the allowed regression cannot be negative")
    return value


def add_diff_parser(sub) -> None:
    d = sub.add_parser("diff", help="compare two traces: new/gone findings, SLI deltas, a regression verdict",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("base", help="the reference trace: a file, folder or archive")
    d.add_argument("new", help="the candidate trace: a file, folder or archive")
    d.add_argument("--rules", help="folder of team rules added to (and overriding) the builtin pack")
    d.add_argument("--format", choices=["text", "json", "markdown"], default="text")
    d.add_argument("--fail-on", choices=SEVERITIES, default="error",
                   help="a finding at or above this severity that NEW has and BASE has not is a regression "
                        "(default: error)")
    d.add_argument("--fail-on-regression", type=regression_pct, metavar="PCT",
                   help="an SLI (step latency p50/p99/tail, time to first token) worse by more than PCT "
                        "percent, or an SLO newly violated, is a regression (default: SLIs are reported only)")
    d.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    d.set_defaults(func=cmd_diff)


class _Unusable(Exception):
    """A side with no usable file: exit 2."""


def cmd_diff(args) -> int:
    # the engine (pandas, pyarrow: ~1 s of imports) only when a diff runs, as for `diagnose`
    from diagnosis.engine.diff import compare
    from diagnosis.engine.diff.render import RENDERERS
    from ingest.engine.events import ParseError
    from rules.engine.loader import RuleError, load_rule_dirs

    try:
        rules = load_rule_dirs([args.rules] if args.rules else None)
        (base, base_figures), (new, new_figures) = (_diagnose(p, rules, not args.quiet) for p in (args.base, args.new))
    except (ParseError, RuleError, FileNotFoundError, _Unusable) as e:
        print(f"tracedoc: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # a bug outside the parsers: no traceback, exit 3
        return internal_error(e)
    diff = compare(base, new, base_figures, new_figures, fail_on=args.fail_on,
                   fail_on_regression_pct=args.fail_on_regression)
    out = RENDERERS[args.format](diff)
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    crashed = [a["path"] for r in (base, new) for a in r["trace"]["artifacts"] if a.get("internal_error")]
    if crashed:
        print(f"tracedoc: internal error while parsing {len(crashed)} file(s) ({', '.join(crashed[:5])}); "
              f"the diff covers the rest; exit {EXIT_INTERNAL}", file=sys.stderr)
        return EXIT_INTERNAL
    return EXIT_FINDINGS if diff.verdict.regression else EXIT_OK


def _diagnose(path: str, rules, show_progress: bool):
    """(JSON report, figures) of one side; names its unusable files on stderr."""
    # the engine, as in cmd_diff
    from diagnosis.engine.pipeline import run
    from diagnosis.engine.trace_figures import measure

    measured = []
    # the diff reads the JSON form: the same contract as a stored report or a server's answer
    report = run([path], rules=rules, show_progress=show_progress,
                 on_events=lambda ev: measured.append(measure(ev))).to_dict()
    artifacts = report["trace"]["artifacts"]
    unusable = [a for a in artifacts if a["format"] == "unknown"]
    for a in unusable:
        print(f"tracedoc: {a['warnings'][-1] if a['warnings'] else a['path'] + ': format not recognised'}",
              file=sys.stderr)
    if len(unusable) == len(artifacts):
        raise _Unusable(f"{path}: no usable file to diagnose")
    return report, measured[0]
