"""The `tracedoc` command: diagnose traces in-process (no server), submit them to a server, and rule tooling."""
from __future__ import annotations

import argparse
import sys

from cli.output import EXIT_BAD_INPUT, print_report

# 0 nothing at or above --fail-on, 1 findings at or above it, 2 unusable input (cli.output);
# 3 an internal error: tracedoc itself failed (a bug), whatever the findings. Never 1, so CI
# does not read a crash as "findings".
EXIT_INTERNAL = 3


def cmd_diagnose(args) -> int:
    from diagnosis.pipeline import run
    from ingest.events import ParseError
    from rules.loader import RuleError

    try:
        report = run(args.paths, rules_dir=args.rules, show_progress=not args.quiet)
    except (ParseError, RuleError, FileNotFoundError) as e:
        print(f"tracedoc: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # a bug outside the parsers (rules engine, report): no traceback, exit 3
        return _internal_error(e)
    status = print_report(report, args.format, args.fail_on)
    crashed = [a["path"] for a in report["trace"]["artifacts"] if a.get("internal_error")]
    if crashed:  # print_report named each file and its error on stderr
        print(f"tracedoc: internal error while parsing {len(crashed)} file(s) ({', '.join(crashed[:5])}); "
              f"the report covers the rest; exit {EXIT_INTERNAL}", file=sys.stderr)
        return EXIT_INTERNAL
    return status


def _internal_error(e: Exception) -> int:
    import os
    import traceback
    if os.environ.get("TRACEDOC_DEBUG"):
        traceback.print_exc()
    print(f"tracedoc: internal error: {type(e).__name__}: {e} (a tracedoc bug, not a problem with "
          "the input; set TRACEDOC_DEBUG=1 for the traceback)", file=sys.stderr)
    return EXIT_INTERNAL


def default_corpus() -> str:
    """Rule fixtures name scenarios relative to the corpus root."""
    import os
    return os.environ.get("TRACEDOC_CORPUS", os.path.join("..", "shared", "corpus"))


def cmd_rules_validate(args) -> int:
    from rules.cli_commands import validate_main
    return validate_main(args.files)


def cmd_rules_test(args) -> int:
    from rules.cli_commands import test_main
    return test_main(args.dir, args.corpus)


def cmd_rules_features(args) -> int:
    from rules.features import list_features
    print("| feature | rows |\n|---|---|")
    for f in list_features():
        print(f"| `{f['name']}` | {f['doc']} |")
    return 0


def cmd_rules_coverage(args) -> int:
    from diagnosis.coverage import write_coverage
    return write_coverage(args.corpus, args.output, rules_dir=args.dir)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tracedoc", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    d = sub.add_parser("diagnose", help="diagnose files, folders or archives as one trace")
    d.add_argument("paths", nargs="+", help="files, folders, tar/tar.gz/zip archives (one trace)")
    d.add_argument("--rules", help="folder of team rules added to (and overriding) the builtin pack")
    d.add_argument("--format", choices=["text", "json", "junit", "sarif"], default="text")
    d.add_argument("--fail-on", choices=["info", "warning", "error", "critical"], default="error",
                   help="exit 1 when a finding is at or above this severity (default: error); "
                        "2 means unusable input, 3 an internal error (a tracedoc bug)")
    d.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    d.set_defaults(func=cmd_diagnose)

    from cli.submit import add_submit_parser  # upload to a server instead of diagnosing here
    add_submit_parser(sub)

    r = sub.add_parser("rules", help="validate and test rules").add_subparsers(dest="rules_cmd", required=True)
    v = r.add_parser("validate", help="check rule files; prints file:line:col: message")
    v.add_argument("files", nargs="+")
    v.set_defaults(func=cmd_rules_validate)
    t = r.add_parser("test", help="run each rule's fires/quiet fixtures")
    t.add_argument("dir", nargs="?", help="folder of rules (default: the builtin pack)")
    t.add_argument("--corpus", default=default_corpus(), help="root the fixtures are relative to")
    t.set_defaults(func=cmd_rules_test)
    r.add_parser("features", help="the built-in features rules can read (`from:`), as a Markdown table") \
        .set_defaults(func=cmd_rules_features)
    c = r.add_parser("coverage", help="write the rule x scenario coverage table")
    c.add_argument("dir", nargs="?", help="folder of team rules to include")
    c.add_argument("--corpus", default=default_corpus())
    c.add_argument("--output", default="-", help="Markdown file to write (default stdout)")
    c.set_defaults(func=cmd_rules_coverage)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
