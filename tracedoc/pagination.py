"""The one paginator of every API list: limit/offset, validated instead of trusted.

DRF's LimitOffsetPagination falls back to the default page on a non-numeric limit and passes
any offset to the database, where one past bigint range is a DataError (a 500). Here a bad
value (non-numeric, negative, a limit above MAX_LIMIT, an offset above MAX_OFFSET) is a 400
naming the parameter and the bound.
"""
from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

MAX_LIMIT = 500
# Far past any real table, far below PostgreSQL's bigint: an OFFSET the database can take.
MAX_OFFSET = 10**12


def _bounded_int(request: Request, name: str, default: int, minimum: int, maximum: int | None) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError({name: f"expected an integer, got {raw[:40]!r}"}) from None
    if value < minimum:
        raise ValidationError({name: f"must be at least {minimum}, got {value}"})
    if maximum is not None and value > maximum:
        raise ValidationError({name: f"must be at most {maximum}, got {raw[:40]}"})
    return value


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT

    def get_limit(self, request: Request) -> int:
        return _bounded_int(request, self.limit_query_param, self.default_limit, 1, self.max_limit)

    def get_offset(self, request: Request) -> int:
        return _bounded_int(request, self.offset_query_param, 0, 0, MAX_OFFSET)

    def get_schema_operation_parameters(self, view) -> list[dict]:
        """DRF's two parameters with the bounds checked above, so a client knows them."""
        bounds = {self.limit_query_param: {"minimum": 1, "maximum": self.max_limit},
                  self.offset_query_param: {"minimum": 0, "maximum": MAX_OFFSET}}
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        return parameters
