"""Checking tool arguments against the JSON-schema subset that tool definitions use.

Why not the ``jsonschema`` package: where Jupyter is installed it pulls in an
optional URI-format plugin whose import was measured here at 3.5–5 s, paid by
every kernel and CLI start. Tool schemas (ours and those MCP servers send) use
a small, stable subset: ``type`` (also as a list), ``properties``,
``required``, ``additionalProperties``, ``enum``, ``const``, ``items``,
``minimum``/``maximum`` (and their exclusive forms), ``minLength``/``maxLength``, ``minItems``/``maxItems``
and ``anyOf``/``oneOf``. Keywords outside it are ignored, never guessed at.
"""

from __future__ import annotations

from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


class SchemaViolation(ValueError):
    """Arguments that do not fit the tool's schema; the message names the path."""


def check_schema(schema: Any, where: str = "parameters") -> None:
    """Raise ValueError if a tool's parameter schema is structurally unusable."""
    if not isinstance(schema, dict):
        raise ValueError(f"{where} must be an object")
    types = schema.get("type")
    for name in types if isinstance(types, list) else [types] if types is not None else []:
        if name not in _TYPES:
            raise ValueError(f"{where}: unknown type {name!r}")
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise ValueError(f"{where}.properties must be an object")
    for key, sub in properties.items():
        check_schema(sub, f"{where}.properties.{key}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ValueError(f"{where}.required must be a list of names")
    if "items" in schema and isinstance(schema["items"], dict):
        check_schema(schema["items"], f"{where}.items")


def validate(value: Any, schema: dict[str, Any], path: str = "") -> None:
    """Raise SchemaViolation for the first place ``value`` breaks ``schema``."""
    if type(value) is dict and len(schema) == 1 and schema.get("type") == "object":
        return  # "any object", the schema of tools that take free-form arguments: nothing else to check
    prefix = f"{path}: " if path else ""
    for keyword in ("anyOf", "oneOf"):
        options = schema.get(keyword)
        if options:
            if not any(_fits(value, option, path) for option in options):
                raise SchemaViolation(f"{prefix}{_short(value)} matches none of the allowed forms")
    types = schema.get("type")
    if types is not None and not (any(_is_type(value, name) for name in types) if isinstance(types, list)
                                  else _is_type(value, types)):
        names = types if isinstance(types, list) else [types]
        raise SchemaViolation(f"{prefix}{_short(value)} is not of type {' or '.join(map(repr, names))}")
    if "const" in schema and value != schema["const"]:
        raise SchemaViolation(f"{prefix}expected {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        raise SchemaViolation(f"{prefix}{_short(value)} is not one of {schema['enum']!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise SchemaViolation(f"{prefix}{value} is less than the minimum of {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise SchemaViolation(f"{prefix}{value} is greater than the maximum of {schema['maximum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            raise SchemaViolation(f"{prefix}{value} must be greater than {schema['exclusiveMinimum']}")
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            raise SchemaViolation(f"{prefix}{value} must be less than {schema['exclusiveMaximum']}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            raise SchemaViolation(f"{prefix}text shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise SchemaViolation(f"{prefix}text longer than {schema['maxLength']} characters")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            raise SchemaViolation(f"{prefix}needs at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise SchemaViolation(f"{prefix}allows at most {schema['maxItems']} items")
        items = schema.get("items")
        if isinstance(items, dict):
            for index, item in enumerate(value):
                validate(item, items, f"{path}/{index}" if path else str(index))
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                raise SchemaViolation(f"{prefix}{name!r} is a required property")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            child = f"{path}/{key}" if path else key
            if key in properties:
                validate(item, properties[key], child)
            elif extra is False:
                raise SchemaViolation(f"{prefix}unexpected property {key!r}")
            elif isinstance(extra, dict):
                validate(item, extra, child)


def _fits(value: Any, schema: dict[str, Any], path: str) -> bool:
    try:
        validate(value, schema, path)
    except SchemaViolation:
        return False
    return True


def _is_type(value: Any, name: str) -> bool:
    if type(value) is dict:  # the usual case, an arguments object: decided without the checks below
        return name == "object" or name not in _TYPES
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(name, object))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
