"""`manage.py rules validate FILE... | test [DIR] | coverage`: the `tracedoc rules` commands
inside the Django project (same code, same exit codes)."""
import argparse
import sys

from django.core.management.base import BaseCommand

from cli.main import build_parser


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("args", nargs=argparse.REMAINDER,
                            help="validate FILE... | test [DIR] [--corpus PATH] | coverage [--output FILE]")

    def handle(self, *args, **options):
        parsed = build_parser().parse_args(["rules", *args])
        code = parsed.func(parsed)
        if code:
            sys.exit(code)
