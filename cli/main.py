"""The `tracedoc` command: diagnose traces in-process (no server), submit them to a server, and rule tooling."""
from __future__ import annotations

import argparse
import gc
import os
import sys

# Before numpy loads: tracedoc does no linear algebra, and OpenBLAS's idle threads spin for a
# while after start, taking ~5% of the CPU from the parse on a small machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from cli.output import EXIT_BAD_INPUT, EXIT_INTERNAL, FORMATS, internal_error, print_report, run
from cli.rules_parser import add_rules_parser
from rules.engine.severity import SEVERITIES

# Exit status: 0 nothing at or above --fail-on, 1 findings at or above it, 2 unusable input,
# 3 an internal error (cli.output).
__all__ = ["EXIT_INTERNAL", "build_parser", "main"]


def cmd_diagnose(args) -> int:
    # The engine's imports make objects that live to the end of the command; the collector
    # walked them again at each of its passes while they were made (0.04-0.07 s of ~1.2 s).
    # It is off until they are made, then they are frozen (diagnosis.engine.pipeline._WarmUp).
    gc.disable()
    try:
        return _diagnose(args)
    finally:
        gc.enable()


def _diagnose(args) -> int:
    # the engine (pandas, pyarrow: ~1 s of imports) only for the command that diagnoses here
    from diagnosis.engine.pipeline import run
    from ingest.engine.events import ParseError
    from rules.engine.errors import RuleError  # not rules.engine.loader: that loads the engine (see _WarmUp)

    try:
        report = run(args.paths, rules_dir=args.rules, show_progress=not args.quiet)
    except (ParseError, RuleError, FileNotFoundError) as e:
        print(f"tracedoc: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # a bug outside the parsers (rules engine, report): no traceback, exit 3
        return internal_error(e)
    status = print_report(report, args.format, args.fail_on)
    crashed = [a.path for a in report.trace.artifacts if a.internal_error]
    if crashed:  # print_report named each file and its error on stderr
        print(f"tracedoc: internal error while parsing {len(crashed)} file(s) ({', '.join(crashed[:5])}); "
              f"the report covers the rest; exit {EXIT_INTERNAL}", file=sys.stderr)
        return EXIT_INTERNAL
    return status


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tracedoc", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    d = sub.add_parser("diagnose", help="diagnose files, folders or archives as one trace")
    d.add_argument("paths", nargs="+", help="files, folders, tar/tar.gz/zip archives (one trace)")
    d.add_argument("--rules", help="folder of team rules added to (and overriding) the builtin pack")
    d.add_argument("--format", choices=FORMATS, default="text")
    d.add_argument("--fail-on", choices=SEVERITIES, default="error",
                   help="exit 1 when a finding is at or above this severity (default: error); "
                        "2 means unusable input, 3 an internal error (a tracedoc bug)")
    d.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    d.set_defaults(func=cmd_diagnose)

    from cli.submit_args import add_submit_parser  # upload to a server instead of diagnosing here
    add_submit_parser(sub)
    from cli.diff import add_diff_parser  # compare two traces: the CI regression gate
    add_diff_parser(sub)

    add_rules_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    return run(build_parser(), argv)


def entry() -> None:
    """The `tracedoc` command: `main`, then out without the interpreter's teardown. Freeing
    every module's objects one by one (pandas, pyarrow, the rule engine) took 0.11-0.19 s after
    a diagnosis of 0.5-2 s, for a process that ends anyway. Everything that must outlive the
    command is done by then: the report is written, temporary folders removed, no thread left."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader left (`| head`): what it wanted was written
        pass
    os._exit(code)


if __name__ == "__main__":
    entry()
