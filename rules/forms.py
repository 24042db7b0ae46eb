from django import forms
from django.urls import reverse
from django.utils import timezone

from accounts.models import Team
from ingest.models import Trace


def unix_newlines(text: str) -> str:
    """Browsers send a textarea with CRLF line ends: keep a rule's stored text byte-stable,
    so an unchanged rule never counts as a changed one (which would need a version bump)."""
    return text.replace("\r\n", "\n")


class RuleForm(forms.Form):
    """A rule's YAML text (validated live by htmx while it is typed) and, for a new rule of
    a user in several teams, the team it belongs to."""
    yaml = forms.CharField(label="Rule (YAML)", strip=False, widget=forms.Textarea(attrs={
        "class": "yaml-editor", "spellcheck": "false", "autocomplete": "off", "rows": 26,
        "hx-trigger": "keyup changed delay:500ms, editor-change delay:400ms", "hx-target": "#validation", "hx-swap": "innerHTML"}))
    team = forms.ModelChoiceField(queryset=Team.objects.none(), to_field_name="slug", empty_label=None)

    def __init__(self, *args, user, new: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["yaml"].widget.attrs["hx-post"] = reverse("rules:rule-validate")
        teams = Team.objects.of(user)
        self.fields["team"].queryset = teams
        if not new or teams.count() <= 1:
            del self.fields["team"]

    def clean_yaml(self):
        return unix_newlines(self.cleaned_data["yaml"])


class TraceChoiceForm(forms.Form):
    """Which finished trace to run a rule on."""
    trace = forms.ModelChoiceField(queryset=Trace.objects.none(), empty_label=None,
                                   label="Trace")

    def __init__(self, *args, traces, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["trace"].queryset = traces.prefetch_related("artifacts")
        self.fields["trace"].label_from_instance = trace_choice_label


def trace_choice_label(trace: Trace) -> str:
    """What tells one trace from another in the picker: name, upload time, labels and the
    formats of its files (not the first file's name, which many traces share)."""
    formats = sorted({a.format for a in trace.artifacts.all() if a.format})
    labels = ", ".join(f"{k}={v}" for k, v in sorted((trace.labels or {}).items()))
    parts = [f"#{trace.pk} {trace}",
             f"uploaded {timezone.localtime(trace.created_at):%Y-%m-%d %H:%M}",
             ", ".join(formats) or "no parsed files"]
    if labels:
        parts.append(labels)
    return " · ".join(parts) + f" ({trace.team})"
