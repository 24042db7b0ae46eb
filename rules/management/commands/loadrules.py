"""`manage.py loadrules`: load and validate the builtin rule pack; prints what it holds."""
from collections import Counter

from django.core.management.base import BaseCommand, CommandError

from rules.engine.loader import RuleError, load_rule_dirs
from rules.engine.severity import MOST_SEVERE_FIRST


class Command(BaseCommand):
    help = __doc__

    def handle(self, **options):
        try:
            rules = load_rule_dirs(None)
        except RuleError as e:
            raise CommandError(f"the builtin rule pack does not load: {e}") from None
        by_severity = Counter(r.severity for r in rules)
        detail = ", ".join(f"{by_severity[s]} {s}" for s in MOST_SEVERE_FIRST if by_severity[s])
        self.stdout.write(f"builtin rules: {len(rules)} loaded ({detail})")
