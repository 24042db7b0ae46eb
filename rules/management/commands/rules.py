"""`manage.py rules validate FILE... | test [DIR] | features | coverage`: the `tracedoc rules`
commands inside the Django project (same code, same exit codes)."""
import argparse
import sys

from django.core.management.base import BaseCommand

from cli.rules_parser import rules_parser  # the command line's `rules` group (pyproject: cli-on-top)


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("args", nargs=argparse.REMAINDER,
                            help="validate FILE... | test [DIR] [--corpus PATH] | features | coverage [--output FILE]")

    def handle(self, *args, **options):
        parsed = rules_parser().parse_args(["rules", *args])
        code = parsed.func(parsed)
        if code:
            sys.exit(code)
