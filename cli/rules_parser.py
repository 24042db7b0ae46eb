"""The arguments of the `rules` command group, shared by the `tracedoc rules` CLI
(cli/main.py) and `manage.py rules` (same code, same exit codes), so neither imports the
other. What each command does is in cli/rules_commands.py."""
from __future__ import annotations

import argparse
import os


def default_corpus() -> str:
    """Rule fixtures name scenarios relative to the corpus root."""
    return os.environ.get("TRACEDOC_CORPUS", os.path.join("..", "shared", "corpus"))


def _commands():
    from cli import rules_commands  # pandas and the diagnosis (~2 s of imports): only for a `rules` command
    return rules_commands


def add_rules_parser(sub) -> None:
    """The `rules` sub-commands, on an argparse sub-parsers object; each sets `func(args) -> exit code`."""
    r = sub.add_parser("rules", help="validate and test rules").add_subparsers(dest="rules_cmd", required=True)
    v = r.add_parser("validate", help="check rule files; prints file:line:col: message")
    v.add_argument("files", nargs="+")
    v.set_defaults(func=lambda args: _commands().validate_main(args.files))
    t = r.add_parser("test", help="run each rule's fires/quiet fixtures")
    t.add_argument("dir", nargs="?", help="folder of rules (default: the builtin pack)")
    t.add_argument("--corpus", default=default_corpus(), help="root the fixtures are relative to")
    t.set_defaults(func=lambda args: _commands().test_main(args.dir, args.corpus))
    r.add_parser("features", help="the built-in features rules can read (`from:`), as a Markdown table") \
        .set_defaults(func=lambda args: _commands().features_main())
    c = r.add_parser("coverage", help="write the rule x scenario coverage table")
    c.add_argument("dir", nargs="?", help="folder of team rules to include")
    c.add_argument("--corpus", default=default_corpus())
    c.add_argument("--output", default="-", help="Markdown file to write (default stdout)")
    c.set_defaults(func=lambda args: _commands().coverage_main(args.corpus, args.output, args.dir))


def rules_parser() -> argparse.ArgumentParser:
    """A parser of the `rules` group alone (`manage.py rules ...`)."""
    p = argparse.ArgumentParser(prog="rules")
    add_rules_parser(p.add_subparsers(dest="cmd", required=True))
    return p
