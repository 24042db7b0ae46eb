from django import forms
from django.contrib.auth import get_user_model

from diagnosis.models import Cluster


class ClusterTriageForm(forms.ModelForm):
    class Meta:
        model = Cluster
        fields = ["status", "assignee"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Only the cluster's team members can be assigned.
        self.fields["assignee"].queryset = get_user_model().objects.filter(teams=self.instance.team, is_active=True)
        self.fields["assignee"].label_from_instance = lambda u: u.get_username()
        self.fields["assignee"].empty_label = "unassigned"
