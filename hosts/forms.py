from django import forms

from hosts.models import CaptureRequest
from hosts.serializers import MAX_PROFILER_STEPS


class CaptureForm(forms.Form):
    kind = forms.ChoiceField(choices=CaptureRequest.Kind.choices)
    steps = forms.IntegerField(min_value=1, max_value=MAX_PROFILER_STEPS, initial=20,
                               help_text="profiler window, in the program's steps")
