"""The query parameters a Django form reads, as OpenAPI parameters: one source for what the
form accepts (choices, bounds, lengths, repeats) and what the schema tells a client."""
from __future__ import annotations

from django import forms
from drf_spectacular.utils import OpenApiParameter


def query_parameters(form_class: type[forms.Form], descriptions: dict[str, str] | None = None,
                     many: tuple[str, ...] = ()) -> list[OpenApiParameter]:
    """One parameter per field of `form_class`; `many` names fields read from every occurrence
    (besides multiple-choice fields), `descriptions` adds what a field's help text lacks."""
    descriptions = descriptions or {}
    parameters = []
    for name, field in form_class.base_fields.items():
        schema = _schema(field)
        if isinstance(field, forms.MultipleChoiceField) or name in many:
            schema = {"type": "array", "items": schema}  # drf-spectacular's many= takes basic types only
        parameters.append(OpenApiParameter(name, schema, required=field.required, explode=True,
                                           description=descriptions.get(name, str(field.help_text or ""))))
    return parameters


def _schema(field: forms.Field) -> dict:
    if isinstance(field, forms.DateTimeField):
        return {"type": "string", "format": "date-time"}
    if isinstance(field, forms.ChoiceField):  # MultipleChoiceField too
        values = [str(value) for value, _ in field.choices]
        if not field.required and "" not in values and not isinstance(field, forms.MultipleChoiceField):
            values.insert(0, "")  # left blank: no filter
        return {"type": "string", "enum": values}
    if isinstance(field, forms.IntegerField):
        return {"type": "integer", **_bounds(field, "minimum", "min_value"), **_bounds(field, "maximum", "max_value")}
    if isinstance(field, forms.CharField):
        return {"type": "string", **_bounds(field, "maxLength", "max_length")}
    return {"type": "string", **_bounds(field, "pattern", "pattern")}  # a field of our own may say its pattern


def _bounds(field: forms.Field, key: str, attribute: str) -> dict:
    value = getattr(field, attribute, None)
    return {} if value is None else {key: value}
