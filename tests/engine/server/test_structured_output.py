"""response_format into grammars, with the bounds that keep a stranger's schema harmless."""

import pytest

from engine.server.errors import APIError
from engine.server.structured_output import grammar_for_response_format, schema_grammar


def test_plain_text_needs_no_grammar():
    assert grammar_for_response_format(None) == ""
    assert grammar_for_response_format({"type": "text"}) == ""


def test_json_object_and_json_schema_give_grammars():
    assert "root ::=" in grammar_for_response_format({"type": "json_object"})
    grammar = grammar_for_response_format(
        {"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}
    )  # fmt: skip
    assert '"\\"n\\""' in grammar


def test_strings_refuse_control_characters_as_json_does():
    grammar = schema_grammar({"type": "string"}, param="x")
    assert r"\x00-\x1F" in grammar


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "array", "minItems": 5000}, "minItems"),
        ({"type": "string", "maxLength": 10**7}, "maxLength"),
        ({"$ref": "https://example.com/schema.json"}, "refers outside"),
        ({"properties": {"a": {"$ref": "file:///etc/passwd"}}}, "refers outside"),
        ({"type": "bogus"}, "cannot be used"),
        ([1, 2], "must be an object"),
    ],
)  # fmt: skip
def test_schemas_that_cannot_be_enforced_safely_are_refused(schema, says):
    with pytest.raises(APIError, match=says) as caught:
        schema_grammar(schema, param="response_format")
    assert caught.value.status == 400


def test_a_schema_nested_too_deeply_is_refused():
    schema: dict = {"type": "string"}
    for _ in range(40):
        schema = {"type": "array", "items": schema}
    with pytest.raises(APIError, match="too deeply"):
        schema_grammar(schema, param="response_format")
