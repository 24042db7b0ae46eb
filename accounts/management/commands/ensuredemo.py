"""`manage.py ensuredemo`: a local login for `make run` (user demo / password demo in team
demo). Refuses to run with DEBUG off: production users are made by an admin."""
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.models import Team

USERNAME = PASSWORD = TEAM = "demo"


class Command(BaseCommand):
    help = __doc__

    def handle(self, **options):
        if not settings.DEBUG:
            raise CommandError("ensuredemo is for local runs (DEBUG on) only")
        user, created = get_user_model().objects.get_or_create(username=USERNAME)
        if created:
            user.set_password(PASSWORD)
            user.save()
        team, _ = Team.objects.get_or_create(slug=TEAM, defaults={"name": "Demo"})
        team.members.add(user)
        self.stdout.write(f"web login: {USERNAME} / {PASSWORD}" if created else f"web login: user {USERNAME}")
        self.stdout.write(f"API token: python manage.py createtoken {USERNAME} --team {TEAM}")
