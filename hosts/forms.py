from django import forms

from hosts.models import CaptureRequest
from hosts.serializers import MAX_PROFILER_STEPS


class CaptureForm(forms.Form):
    kind = forms.ChoiceField(choices=CaptureRequest.Kind.choices)
    steps = forms.IntegerField(min_value=1, max_value=MAX_PROFILER_STEPS, initial=20,
                               help_text="profiler window, in the program's steps")


class ClosedLoopToggleForm(forms.Form):
    """Opt a cluster, or one of its rules that declares a capture, in or out of the closed loop."""
    target = forms.ChoiceField(choices=[("cluster", "this cluster"), ("rule", "every finding of a rule")])
    rule_id = forms.CharField(max_length=200, required=False)
    on = forms.TypedChoiceField(choices=[("1", "on"), ("0", "off")], coerce=lambda v: v == "1")

    def __init__(self, *args, rules: frozenset[str] = frozenset(), **kwargs):
        super().__init__(*args, **kwargs)
        self.rules = rules

    def clean(self):
        data = super().clean()
        if data.get("target") == "rule" and data.get("rule_id") not in self.rules:
            # only a rule of this cluster that declares a plan: the page is not the policy's editor
            raise forms.ValidationError("rule_id: a rule of this cluster that declares a capture")
        return data
