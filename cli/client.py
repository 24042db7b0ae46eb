"""`tracedoc-client` (also installed as `tracedoc` by the slim distribution, clients/python/):
the server-side commands of `tracedoc` alone, `submit` today. It diagnoses nothing here, so it
needs neither the engine nor any package outside the standard library."""
from __future__ import annotations

import argparse
import sys

from cli.output import run
from cli.submit_args import add_submit_parser

DESCRIPTION = ("Submit traces to a tracedoc server, print its diagnosis and exit 0/1/2 for a CI gate "
               "(the slim client: `tracedoc diagnose` and `tracedoc diff` need the full tracedoc package).")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tracedoc-client", description=DESCRIPTION)
    sub = p.add_subparsers(dest="cmd", required=True)
    add_submit_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    return run(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
