"""Teams: every trace, cluster and rule belongs to one; a user may be in several.

`Team.objects.of(user)` is the single tenancy choke point used by the HTML views and the
API alike, so a user never sees another team's objects.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models


class TeamQuerySet(models.QuerySet):
    def of(self, user) -> "TeamQuerySet":
        if not user.is_authenticated:
            return self.none()
        return self.filter(members=user)


class Team(models.Model):
    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=60, unique=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug
