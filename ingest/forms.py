from django import forms
from django.core.exceptions import ValidationError

from accounts.models import Team
from ingest.uploads import parse_labels


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        kwargs.setdefault("allow_empty_file", True)  # the parse step says why an empty file is useless
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        files = data if isinstance(data, (list, tuple)) else [data]
        return [super(MultipleFileField, self).clean(f, initial) for f in files if f] or self._required()

    def _required(self):
        raise ValidationError("Choose at least one file.")


class UploadForm(forms.Form):
    files = MultipleFileField(
        help_text="Profiler traces, Nsight exports, NVML samples, OTLP spans, perf output, logs; "
                  "or one archive (zip, tar, tar.gz) holding them.")
    name = forms.CharField(max_length=200, required=False, help_text="Defaults to the first file's name.")
    labels = forms.CharField(required=False, help_text="key=value, comma separated (env=prod, model=llama-70b)",
                             widget=forms.TextInput(attrs={"placeholder": "env=prod, model=llama-70b"}))
    team = forms.ModelChoiceField(queryset=Team.objects.none(), to_field_name="slug", empty_label=None)

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = Team.objects.of(user)
        if self.fields["team"].queryset.count() <= 1:
            self.fields["team"].widget = forms.HiddenInput()
            self.fields["team"].required = False

    def clean_labels(self):
        return parse_labels(self.cleaned_data["labels"])
