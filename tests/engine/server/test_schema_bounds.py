"""What a JSON schema may cost llama.cpp, checked before translation (findings 1 and 3): a
table of patterns and of alternatives, and the time the check itself takes on a large schema."""

import time

import pytest

from engine.server.schema_bounds import (
    MAX_PARALLEL_PARSES,
    SchemaTooCostly,
    check_schema_costs,
    pattern_size,
)


def _ambiguous_levels(levels: int, width: int = 2) -> dict:
    """`levels` $defs, each an alternative of `width` arrays of the next: width**levels
    parses (the shape that held the starter model's sampler for minutes per token)."""
    defs = {}
    for i in range(levels):
        inner = {"$ref": f"#/$defs/a{i + 1}"} if i < levels - 1 else {"type": "string"}
        defs[f"a{i}"] = {"anyOf": [{"type": "array", "items": dict(inner)} for _ in range(width)]}
    return {"$defs": defs, "type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}}


RECURSIVE_AMBIGUOUS = {"$defs": {"n": {"anyOf": [
    {"type": "array", "items": {"$ref": "#/$defs/n"}},
    {"type": "array", "items": {"$ref": "#/$defs/n"}}]}}, "$ref": "#/$defs/n"}  # fmt: skip
TREE = {"type": "object", "properties": {"name": {"type": "string"},
        "children": {"type": "array", "items": {"$ref": "#"}}}}  # fmt: skip
JSON_VALUE = {"$defs": {"v": {"anyOf": [
    {"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
    {"type": "array", "items": {"$ref": "#/$defs/v"}},
    {"type": "object", "additionalProperties": {"$ref": "#/$defs/v"}}]}},
    "$ref": "#/$defs/v"}  # fmt: skip
TAGGED_UNION = {
    "anyOf": [
        {"type": "object", "properties": {"kind": {"const": "a"}, "a": {"type": "string"}}},
        {"type": "object", "properties": {"kind": {"const": "b"}, "b": {"type": "integer"}}},
    ]
}


@pytest.mark.parametrize(
    ("pattern", "size"),
    [(r"^\d{3}-\d{4}$", 8), ("^[a-z]{1,100}@[a-z]{1,100}$", 201), ("^(ab|cd)+$", 8),
     ("^[^]]{2}$", 2), (r"^\{x{2}\}$", 4), ("a{,3}", 3)],
)  # fmt: skip
def test_ordinary_patterns_pass_with_their_expanded_size(pattern, size):
    assert pattern_size(pattern) == size


@pytest.mark.parametrize(
    ("pattern", "says"),
    [("^a{1000000000}$", "repetition"), ("^a{3000000000}$", "repetition"),
     ("^a{2,1001}$", "repetition"), ("^(a{1000}){1000}$", "limit of 10,000"),
     ("^((a{100}){100}){100}$", "limit of 10,000")],
)  # fmt: skip
def test_patterns_that_expand_past_the_limit_are_refused_from_their_text(pattern, says):
    started = time.perf_counter()
    with pytest.raises(SchemaTooCostly, match=says):
        pattern_size(pattern)
    assert time.perf_counter() - started < 0.1


@pytest.mark.parametrize(
    "schema", [TREE, JSON_VALUE, TAGGED_UNION, _ambiguous_levels(4),
               {"type": "array", "items": {"type": ["string", "null"]}}, {}],
)  # fmt: skip
def test_schemas_that_stay_cheap_to_sample_pass(schema):
    check_schema_costs(schema)


@pytest.mark.parametrize(
    ("schema", "says"),
    [(RECURSIVE_AMBIGUOUS, "unboundedly many"), (_ambiguous_levels(5), "32 parses"),
     (_ambiguous_levels(8), "256 parses"), (_ambiguous_levels(1, width=17), "17 parses")],
)  # fmt: skip
def test_alternatives_that_begin_alike_and_nest_are_refused(schema, says):
    with pytest.raises(SchemaTooCostly, match=says) as refused:
        check_schema_costs(schema)
    assert f"limit of {MAX_PARALLEL_PARSES}" in str(refused.value)


def test_the_check_of_a_wide_shared_schema_stays_quick():
    schema = _ambiguous_levels(60, width=1)  # a long chain: no ambiguity, much to walk
    started = time.perf_counter()
    check_schema_costs(schema)
    assert time.perf_counter() - started < 0.5
