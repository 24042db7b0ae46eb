"""`manage.py createtoken USERNAME [--team SLUG] [--name NAME] [--scope read|upload|admin]
[--expires-days N]`: an API token for CI or the CLI.

Creates the user and the team when missing, adds the membership, and prints a NEW token;
an earlier token of the user with the same name is revoked. Only the token's hash is
stored: copy the key now, it cannot be shown again."""
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken, Team


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--team", default="default", help="team slug (default: %(default)s)")
        parser.add_argument("--name", default="cli", help="what the token is for (default: %(default)s)")
        parser.add_argument("--scope", choices=ApiToken.Scope.values, default=ApiToken.Scope.ADMIN,
                            help="what the key may do: read < upload < admin (default: %(default)s)")
        parser.add_argument("--expires-days", type=int, default=None,
                            help="the token stops working after this many days (default: never)")

    @transaction.atomic
    def handle(self, username, team, name, scope, expires_days, **options):
        if expires_days is not None and expires_days <= 0:
            raise CommandError("--expires-days: a positive number of days")
        user, created = get_user_model().objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            user.save()
        team_obj, _ = Team.objects.get_or_create(slug=team, defaults={"name": team})
        team_obj.members.add(user)
        for old in ApiToken.objects.usable().filter(user=user, name=name):
            old.revoke()
        expires_at = timezone.now() + timedelta(days=expires_days) if expires_days else None
        _, key = ApiToken.issue(user, name=name, expires_at=expires_at, scope=scope)
        self.stdout.write(key)
