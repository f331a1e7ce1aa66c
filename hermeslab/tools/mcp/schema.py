"""An MCP tool's input schema rewritten into the form chat-completions APIs and the argument check accept.

Servers send whatever their framework produced, and providers differ in what
they reject; normalising once, when a listing arrives, means the registry, the
argument check and every provider see the same plain JSON Schema.
"""

from __future__ import annotations

from typing import Any

_TYPE_ALIASES = {
    "int": "integer", "long": "integer",
    "float": "number", "double": "number", "decimal": "number",
    "bool": "boolean", "str": "string", "text": "string",
    "dict": "object", "map": "object", "list": "array", "tuple": "array",
}
_JSON_TYPES = {"object", "array", "string", "integer", "number", "boolean"}
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")


def normalize_schema(schema: Any) -> dict[str, Any]:
    """An MCP tool's input schema in the form chat-completions APIs and the argument check accept.

    Servers send what their framework produced. Some providers reject type
    lists, ``null`` branches and objects without ``properties``; some servers
    write ``int`` for ``integer`` or leave out ``type``. The result: nullable
    unions reduced to their non-null form (optional stays expressed by
    ``required``), ``integer`` with ``number`` merged into ``number``, type
    aliases spelled out and unknown type names dropped, ``type: object`` filled
    in where ``properties`` or ``required`` imply it, ``properties`` present on
    every object and ``required`` limited to declared properties. The root is
    always an object schema. The input is not modified.
    """
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    node = _normalize_node(schema)
    if node.get("type") != "object":
        kept = {key: value for key, value in schema.items() if key not in ("type", "anyOf", "oneOf")}
        node = _normalize_node({**kept, "type": "object"})
    return node


def _normalize_node(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict):
        return {}  # a boolean schema or junk: accept any value rather than lose the tool
    node = {key: _normalize_children(key, value) for key, value in schema.items()}
    for keyword in ("anyOf", "oneOf"):
        if isinstance(node.get(keyword), list):
            node = _drop_null_branches(node, keyword)
    if "type" in node:
        kind = _normalize_type(node.pop("type"))
        if kind is not None:
            node["type"] = kind
    if isinstance(node.get("enum"), list):
        values = [value for value in node["enum"] if value is not None]
        if values:
            node["enum"] = values
        else:
            del node["enum"]
    if "default" in node and node["default"] is None:
        del node["default"]
    if "type" not in node and ("properties" in node or "required" in node):
        node["type"] = "object"
    if node.get("type") == "object":
        return _complete_object(node)
    return {key: value for key, value in node.items() if key not in ("properties", "required")}


def _normalize_children(key: str, value: Any) -> Any:
    if key in _SCHEMA_MAPS and isinstance(value, dict):
        return {name: _normalize_node(sub) for name, sub in value.items()}
    if key in _SCHEMA_LISTS and isinstance(value, list):
        return [_normalize_node(sub) for sub in value]
    if key in ("items", "additionalProperties", "not") and isinstance(value, dict):
        return _normalize_node(value)
    if key == "items" and isinstance(value, list):
        return [_normalize_node(sub) for sub in value]
    return value


def _drop_null_branches(node: dict[str, Any], keyword: str) -> dict[str, Any]:
    """``anyOf: [X, {type: null}]`` becomes X (merged with the node's own keys)."""
    branches = [b for b in node[keyword] if not (isinstance(b, dict) and b.get("type") == "null")]
    if len(branches) == len(node[keyword]):
        return node
    rest = {key: value for key, value in node.items() if key != keyword}
    if len(branches) == 1:
        return {**branches[0], **rest}
    if branches:
        rest[keyword] = branches
    return rest


def _normalize_type(kind: Any) -> str | None:
    """One JSON type name, or None when the value constrains nothing usable."""
    names = kind if isinstance(kind, list) else [kind]
    spelled = [_TYPE_ALIASES.get(name, name) for name in names if isinstance(name, str)]
    known = list(dict.fromkeys(name for name in spelled if name in _JSON_TYPES))
    if "integer" in known and "number" in known:
        known.remove("integer")
    if len(known) == 1:
        return known[0]
    if not known and "null" in spelled:
        return "null"
    return None  # several real types (not expressible as one) or none known: leave the value open


def _complete_object(node: dict[str, Any]) -> dict[str, Any]:
    properties = node.get("properties")
    if not isinstance(properties, dict):
        properties = {}
    node["properties"] = properties
    required = node.get("required")
    if isinstance(required, list):
        kept = list(dict.fromkeys(name for name in required if isinstance(name, str) and name in properties))
        if kept:
            node["required"] = kept
        else:
            del node["required"]
    elif "required" in node:
        del node["required"]
    return node
