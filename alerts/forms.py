"""The alert pages' forms: a destination and an alert rule of one of the user's teams. The
model's own checks (Destination.clean: what each kind needs and the SSRF guard;
AlertRule.clean) run through ModelForm validation, as they do for the API."""
from __future__ import annotations

from django import forms

from accounts.models import Team
from alerts.models import AlertRule, Destination


class TeamScopedForm(forms.ModelForm):
    """`team`: one of the user's teams, fixed once the object exists; hidden when the user
    has one team (it stays a form field so the per-team unique name is checked)."""

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        teams = Team.objects.of(user)
        field = self.fields["team"]
        field.queryset, field.empty_label = teams, None
        if self.instance.pk:
            field.disabled = True
        elif teams.count() == 1:
            field.initial, field.widget = teams.first(), forms.HiddenInput()


class DestinationForm(TeamScopedForm):
    url = forms.URLField(required=False, max_length=500, assume_scheme="https", label="URL",
                         help_text="not for email; PagerDuty has a default. A credential: never shown back; "
                                   "left empty on edit, the current one stays.",
                         widget=forms.URLInput(attrs={"placeholder": "https://", "autocomplete": "off"}))
    secret = forms.CharField(required=False, max_length=200, strip=True,
                             widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
                             help_text="webhook: the HMAC signing key; PagerDuty: the routing key. "
                                       "Left empty on edit: the current one stays.")

    class Meta:
        model = Destination
        fields = ["team", "name", "kind", "url", "secret", "emails", "group_wait_s", "repeat_interval_s", "enabled"]
        widgets = {"emails": forms.TextInput()}
        labels = {"group_wait_s": "Group wait (seconds)", "repeat_interval_s": "Repeat interval (seconds)"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("group_wait_s", "repeat_interval_s"):
            self.fields[name].required = False
        if self.instance.pk:  # the stored URL is not sent to the browser: where it goes is
            self.initial["url"] = ""
            self.fields["url"].widget.attrs["placeholder"] = self.instance.masked_url or "https://"

    def clean_url(self) -> str:
        return self.cleaned_data["url"] or (self.instance.url if self.instance.pk else "")

    def _grouping(self, name: str) -> int:
        """Left out (an older form or script): the destination's current value, else the default."""
        value = self.cleaned_data.get(name)
        return value if value is not None else getattr(self.instance, name)

    def clean_group_wait_s(self) -> int:
        return self._grouping("group_wait_s")

    def clean_repeat_interval_s(self) -> int:
        return self._grouping("repeat_interval_s")

    def clean_secret(self) -> str:
        # a secret is never shown back: empty on edit keeps the stored one
        return self.cleaned_data["secret"] or (self.instance.secret if self.instance.pk else "")


class AlertRuleForm(TeamScopedForm):
    class Meta:
        model = AlertRule
        fields = ["team", "name", "trigger", "min_severity", "threshold", "window_minutes", "label_key",
                  "label_value", "destinations", "enabled"]
        widgets = {"destinations": forms.CheckboxSelectMultiple()}
        labels = {"min_severity": "At or above severity", "label_key": "Only traces with label",
                  "label_value": "equal to"}

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, user=user, **kwargs)
        self.fields["destinations"].queryset = Destination.objects.visible_to(user).select_related("team")

    def clean(self):
        cleaned = super().clean()
        team = cleaned.get("team") or (self.instance.team if self.instance.pk else None)
        foreign = [d.name for d in cleaned.get("destinations", ()) if team is not None and d.team_id != team.pk]
        if foreign:
            self.add_error("destinations", f"not destinations of team {team.slug}: {', '.join(foreign)}")
        return cleaned
