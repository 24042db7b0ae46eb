from django import forms

from accounts.models import MAX_TOKEN_DAYS, ApiToken, expiry_after


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="what the key is for: a CI job, an agent, a laptop")
    scope = forms.ChoiceField(choices=ApiToken.Scope.choices, initial=ApiToken.Scope.UPLOAD)
    expires_days = forms.IntegerField(label="Expires after (days)", min_value=1, max_value=MAX_TOKEN_DAYS,
                                      required=False, initial=90, help_text="empty: never")

    def issue(self, user) -> tuple[ApiToken, str]:
        data = self.cleaned_data
        return ApiToken.issue(user, name=data["name"], scope=data["scope"],
                              expires_at=expiry_after(data.get("expires_days")))
