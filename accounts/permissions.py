"""What an API token's scope lets it do (accounts.models.ApiToken.Scope).

Reading (GET, HEAD, OPTIONS) needs `read`; any change needs `admin` unless the view names a
lower scope for the action in `token_scopes` (the trace upload and the agent's heartbeat say
`upload`; checking a rule without saving it says `read`). A browser session is not a token:
its user may do what their teams allow, as on the pages.
"""
from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission

from accounts.models import ApiToken


def needed_scope(request, view) -> str:
    if request.method in SAFE_METHODS:
        return ApiToken.Scope.READ
    return getattr(view, "token_scopes", {}).get(getattr(view, "action", None), ApiToken.Scope.ADMIN)


class TokenScopePermission(BasePermission):
    def has_permission(self, request, view) -> bool:
        token = request.auth
        if not isinstance(token, ApiToken):
            return True
        needed = needed_scope(request, view)
        if token.allows(needed):
            return True
        self.message = (f"this API token's scope is {token.scope}; {request.method} here needs a token "
                        f"with scope {needed} (issue one under Settings > API tokens)")
        return False
