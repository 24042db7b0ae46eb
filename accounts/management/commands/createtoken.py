"""`manage.py createtoken USERNAME [--team SLUG]`: an API token for CI or the CLI.

Creates the user and the team when missing, adds the membership, and prints a NEW token
(an earlier token of the user stops working)."""
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from rest_framework.authtoken.models import Token

from accounts.models import Team


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--team", default="default", help="team slug (default: %(default)s)")

    @transaction.atomic
    def handle(self, username, team, **options):
        user, created = get_user_model().objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            user.save()
        team_obj, _ = Team.objects.get_or_create(slug=team, defaults={"name": team})
        team_obj.members.add(user)
        Token.objects.filter(user=user).delete()
        token = Token.objects.create(user=user)
        self.stdout.write(token.key)
