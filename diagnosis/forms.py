"""Forms of the cluster pages: triage, comments, bulk actions, and the stream's filters
(which the API reads too, so a bad filter is one message on both)."""
from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.utils import timezone

from diagnosis.models import ClusterRecord
from diagnosis.snooze import SNOOZE_PRESETS, Snooze, resolve
from diagnosis.stream import DEFAULT_PERIOD_DAYS, SORTS
from diagnosis.stream_query import MAX_QUERY_CHARS, QueryError, parse
from rules.engine.severity import SEVERITIES

SEVERITY_CHOICES = [(s, s) for s in SEVERITIES]


class ClusterTriageForm(forms.ModelForm):
    class Meta:
        model = ClusterRecord
        fields = ["status", "assignee"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Only the cluster's team members can be assigned.
        self.fields["assignee"].queryset = get_user_model().objects.filter(teams=self.instance.team, is_active=True)
        self.fields["assignee"].label_from_instance = lambda u: u.get_username()
        self.fields["assignee"].empty_label = "unassigned"


class SnoozeForm(forms.Form):
    """Ignore a cluster: a preset ("for 1 hour", "until tomorrow", "for 1 week"), until it
    happens `more` times again, or until a time / a total trace count of one's own."""
    preset = forms.ChoiceField(choices=[("", "")] + [(p.key, p.words) for p in SNOOZE_PRESETS], required=False)
    more = forms.IntegerField(required=False, min_value=1, max_value=100000, label="more times")
    until = forms.DateTimeField(required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    count = forms.IntegerField(required=False, min_value=1, help_text="traces")

    def clean(self):
        data = super().clean()
        if not any(data.get(k) for k in ("preset", "more", "until", "count")):
            raise forms.ValidationError("snooze for a while, until it happens again, or until a time")
        return data

    def snooze(self, cluster: ClusterRecord) -> Snooze:
        data = self.cleaned_data
        if data.get("preset") or data.get("more"):
            return resolve(data.get("preset") or "", data.get("more"), cluster.trace_count, timezone.now())
        return Snooze(until=data.get("until"), count=data.get("count"))


class CommentForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=5000)


class BulkActionForm(forms.Form):
    """A status for several clusters at once, from the stream's check boxes."""
    clusters = forms.ModelMultipleChoiceField(queryset=ClusterRecord.objects.none())
    status = forms.ChoiceField(choices=ClusterRecord.Status.choices)

    def __init__(self, *args, clusters=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["clusters"].queryset = clusters if clusters is not None else ClusterRecord.objects.none()


class MergeForm(forms.Form):
    """Clusters to fold into one: ticked on the stream (`clusters`), or typed on a cluster page
    as issue numbers (`issues`: "12, #15")."""
    clusters = forms.ModelMultipleChoiceField(queryset=ClusterRecord.objects.none(), required=False)
    issues = forms.CharField(required=False, max_length=500, label="issue numbers")

    def __init__(self, *args, clusters=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["clusters"].queryset = clusters if clusters is not None else ClusterRecord.objects.none()

    def clean_issues(self) -> list[int]:
        words = [w.strip().lstrip("#") for w in self.cleaned_data["issues"].replace(",", " ").split()]
        if not all(w.isdigit() for w in words):
            raise forms.ValidationError("issue numbers, e.g. 12, #15")
        return [int(w) for w in words]

    def chosen(self) -> list[ClusterRecord]:
        data = self.cleaned_data
        picked = {c.pk: c for c in data["clusters"]}
        if data["issues"]:
            queryset = self.fields["clusters"].queryset
            found = {c.pk: c for c in queryset.filter(pk__in=data["issues"])}
            missing = sorted(set(data["issues"]) - set(found))
            if missing:
                raise forms.ValidationError(f"no issue {', '.join(f'#{m}' for m in missing)} in your teams")
            picked.update(found)
        return list(picked.values())


class ListValuesInput(forms.TextInput):
    """A text box whose value is every occurrence of the parameter (`label=a=b&label=c=d`)."""

    def value_from_datadict(self, data, files, name):
        return data.getlist(name) if hasattr(data, "getlist") else data.get(name)

    def format_value(self, value):
        return ", ".join(value) if isinstance(value, (list, tuple)) else value


class LabelFilterField(forms.Field):
    """`key=value` pairs, repeated or comma-separated."""
    widget = ListValuesInput
    # what to_python accepts, for the API schema: pairs with a non-blank key, blanks skipped
    pattern = r"^([^,=]*[^,=\s][^,=]*=[^,]*)?(,([^,=]*[^,=\s][^,=]*=[^,]*)?)*$"

    def to_python(self, value) -> list[tuple[str, str]]:
        raw = value if isinstance(value, (list, tuple)) else [value or ""]
        pairs = []
        for part in (p.strip() for item in raw for p in str(item).split(",")):
            if not part:
                continue
            key, sep, val = part.partition("=")
            if not sep or not key.strip():
                raise forms.ValidationError(f"label filter {part!r}: expected key=value")
            pairs.append((key.strip(), val.strip()))
        return pairs


class StreamFilterForm(forms.Form):
    """The stream's filters: `query` (the search bar's language, diagnosis.stream_query) and
    the older one-filter parameters, all of which must hold."""
    query = forms.CharField(required=False, max_length=MAX_QUERY_CHARS, strip=False, label="Search",
                            help_text="e.g. is:unresolved severity:>=error root_cause:nccl.* host:gpu-a "
                                      "label:env=prod")
    status = forms.MultipleChoiceField(choices=ClusterRecord.Status.choices, required=False)
    severity = forms.MultipleChoiceField(choices=SEVERITY_CHOICES, required=False)
    min_severity = forms.ChoiceField(choices=[("", "any severity"), *SEVERITY_CHOICES], required=False)
    root_cause = forms.CharField(required=False, max_length=120)
    host = forms.CharField(required=False, max_length=200)
    label = LabelFilterField(required=False, help_text="key=value")
    slo = forms.CharField(required=False, max_length=120, label="SLO")
    first_seen_after = forms.DateTimeField(required=False)
    first_seen_before = forms.DateTimeField(required=False)
    last_seen_after = forms.DateTimeField(required=False)
    last_seen_before = forms.DateTimeField(required=False)
    q = forms.CharField(required=False, max_length=200, label="Text")
    assignee = forms.CharField(required=False, max_length=150, help_text="a username, me or none")
    sort = forms.ChoiceField(choices=[(s, s.replace("_", " ")) for s in SORTS], required=False)
    period = forms.IntegerField(required=False, min_value=1, max_value=90,
                                help_text=f"days of per-day counts (default {DEFAULT_PERIOD_DAYS})")

    def clean_query(self):
        try:
            return parse(self.cleaned_data.get("query") or "", timezone.now())
        except QueryError as e:
            raise forms.ValidationError(str(e)) from None
