import pytest

from hermeslab.tools.schema_check import SchemaViolation, check_schema, validate

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "mode": {"enum": ["a", "b"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "either": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "nested": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
    },
    "required": ["path"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "value, message",
    [
        ({}, "'path' is a required property"),
        ({"path": ""}, "path: text shorter than 1 characters"),
        ({"path": "a", "count": True}, "count: True is not of type 'integer'"),
        ({"path": "a", "count": 11}, "count: 11 is greater than the maximum of 10"),
        ({"path": "a", "mode": "c"}, "mode: 'c' is not one of ['a', 'b']"),
        ({"path": "a", "tags": ["x", 1]}, "tags/1: 1 is not of type 'string'"),
        ({"path": "a", "tags": ["x", "y", "z"]}, "tags: allows at most 2 items"),
        ({"path": "a", "either": 3}, "either: 3 matches none of the allowed forms"),
        ({"path": "a", "nested": {}}, "nested: 'x' is a required property"),
        ({"path": "a", "other": 1}, "unexpected property 'other'"),
    ],
)
def test_violations_name_the_path(value, message):
    with pytest.raises(SchemaViolation) as info:
        validate(value, SCHEMA)
    assert str(info.value) == message


def test_valid_arguments_pass():
    validate({"path": "a", "count": 3.0, "mode": "b", "tags": ["x"], "either": None, "nested": {"x": 1}}, SCHEMA)


def test_an_object_is_judged_against_every_type_name():
    validate({"a": 1}, {"type": ["null", "object"]})
    validate({"a": 1}, {"type": "any-unknown-name"})  # unknown names are ignored, never guessed at
    with pytest.raises(SchemaViolation, match=r"is not of type 'string' or 'array'"):
        validate({"a": 1}, {"type": ["string", "array"]})
    with pytest.raises(SchemaViolation, match=r"is not of type 'object'"):
        validate([1], {"type": "object"})


def test_unusable_schemas_are_refused():
    check_schema(SCHEMA)
    with pytest.raises(ValueError, match="unknown type 'text'"):
        check_schema({"type": "object", "properties": {"a": {"type": "text"}}})
    with pytest.raises(ValueError, match="required must be a list"):
        check_schema({"type": "object", "required": "a"})
