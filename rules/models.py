"""Team rules: YAML written by a team, validated by the loader on every save.

The rule's id, version, title, severity and owner are read from its YAML, so the row can
never disagree with the text. Changing the text requires a higher `version:` (findings
record the version that produced them); the replaced text is kept in RuleVersion.
"""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction

from accounts.models import Team
from rules.engine.loader import check_text


def check_rule(text: str):
    """(the one loader rule in `text` or None, [{"line", "col", "message"}])."""
    loaded, errors = check_text(text, "rule.yaml")
    if errors:
        return None, [{"line": e.line, "col": e.col, "message": e.message} for e in errors]
    if len(loaded) != 1:
        return None, [{"line": 1, "col": 1, "message": f"expected exactly one rule document, got {len(loaded)}"}]
    return loaded[0], []


def parse_rule(text: str):
    """The loader rule in `text`; ValidationError with `line L, col C: message` otherwise."""
    rule, errors = check_rule(text)
    if errors:
        raise ValidationError([f"line {e['line']}, col {e['col']}: {e['message']}"
                               if e["line"] else e["message"] for e in errors])
    return rule


class TeamRuleQuerySet(models.QuerySet):
    def visible_to(self, user) -> "TeamRuleQuerySet":
        return self.filter(team__in=Team.objects.of(user))

    def loaded_for(self, team: Team) -> list:
        """The team's enabled rules as loader rules (a row that no longer loads, e.g.
        after a schema change, is skipped rather than failing every diagnosis)."""
        rules = []
        for row in self.filter(team=team, enabled=True):
            try:
                rules.append(parse_rule(row.yaml))
            except ValidationError:
                continue
        return rules


class TeamRule(models.Model):
    """A rule a team wrote (the loader's `rules.engine.rule.Rule` is what it parses to)."""
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="rules")
    rule_id = models.CharField(max_length=200, editable=False)
    version = models.IntegerField(default=1, editable=False)
    title = models.CharField(max_length=300, editable=False, blank=True)
    severity = models.CharField(max_length=10, editable=False, blank=True)
    owner = models.CharField(max_length=100, editable=False, blank=True)
    yaml = models.TextField()
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TeamRuleQuerySet.as_manager()

    class Meta:
        ordering = ["rule_id"]
        constraints = [models.UniqueConstraint(fields=["team", "rule_id"], name="rule_id_per_team")]

    def __str__(self) -> str:
        return f"{self.rule_id} v{self.version}"

    def save(self, *args, **kwargs):
        loaded = parse_rule(self.yaml)
        previous = TeamRule.objects.filter(pk=self.pk).first() if self.pk else None
        if previous and previous.rule_id != loaded.id:
            raise ValidationError(f"id: a saved rule keeps its id ({previous.rule_id}); create a new rule instead")
        if previous and previous.yaml != self.yaml and int(loaded.version) <= previous.version:
            raise ValidationError(f"version: the text changed, so bump `version:` above {previous.version}")
        if not previous and TeamRule.objects.filter(team=self.team_id, rule_id=loaded.id).exists():
            raise ValidationError(f"id: the team already has a rule {loaded.id}")
        self.rule_id, self.version = loaded.id, int(loaded.version)
        self.title, self.severity = loaded.title or "", loaded.severity or ""
        self.owner = loaded.owner
        with transaction.atomic():
            if previous and previous.yaml != self.yaml:
                RuleVersion.objects.create(rule=self, version=previous.version, yaml=previous.yaml,
                                           saved_by=previous.updated_by or previous.created_by)
            super().save(*args, **kwargs)


class RuleVersion(models.Model):
    """A replaced text of a rule, kept for audit and to explain old findings."""
    rule = models.ForeignKey(TeamRule, on_delete=models.CASCADE, related_name="versions")
    version = models.IntegerField()
    yaml = models.TextField()
    saved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                 on_delete=models.SET_NULL, related_name="+")
    replaced_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["rule", "-version"]
        constraints = [models.UniqueConstraint(fields=["rule", "version"], name="one_text_per_rule_version")]
