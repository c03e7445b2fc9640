"""`response_format` and forced tool calls as GBNF grammars for llama.cpp's grammar sampler.

The grammar sampler masks every token that would leave the grammar, so the reply parses (unless
max_tokens cuts it short, which the reply's finish_reason "length" says). The JSON-schema
translation is llama.cpp's own, as shipped in llama-cpp-python (`json_schema_to_gbnf`).

Schemas come from strangers: repetition counts are bounded before translation (a `minItems` of
a million would otherwise build a grammar of a million rules), and so is the grammar's size;
patterns and ambiguous alternatives are bounded too (engine/server/schema_bounds.py), since
they cost time and memory the schema's size does not show.
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.server.errors import APIError
from engine.server.schema_bounds import SchemaTooCostly, check_schema_costs

MAX_REPEAT = 1000  # minItems, maxItems, minLength, maxLength and the like
MAX_GRAMMAR_CHARS = 200_000
MAX_SCHEMA_DEPTH = 32
_COUNTS = {"minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"}


def grammar_for_response_format(response_format: dict[str, Any] | None) -> str:
    """The grammar for OpenAI's `response_format`; empty for plain text."""
    if not response_format:
        return ""
    kind = response_format.get("type")
    if kind in (None, "text"):
        return ""
    if kind == "json_object":
        return schema_grammar({"type": "object"}, param="response_format")
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema", {}), dict):
            raise APIError(
                400,
                "response_format.json_schema must be an object with a 'schema' object.",
                param="response_format",
            )
        return schema_grammar(spec.get("schema") or {"type": "object"}, param="response_format")
    raise APIError(
        400,
        f"response_format type {kind!r} is not supported; use 'text', "
        "'json_object' or 'json_schema'.",
        param="response_format",
    )


def schema_grammar(schema: Any, *, param: str) -> str:
    """A GBNF grammar for JSON that follows `schema`; APIError 400 for a schema it cannot take."""
    if not isinstance(schema, dict):
        raise APIError(400, "A JSON schema must be an object.", param=param)
    _check_bounds(schema, param, 0)
    try:
        check_schema_costs(schema)
    except SchemaTooCostly as exc:
        raise APIError(400, str(exc), param=param) from None
    from engine.llama.grammar import json_schema_grammar

    try:
        grammar = json_schema_grammar(json.dumps(schema))
    except MemoryError:
        raise APIError(400, "The JSON schema is too large to enforce; simplify it.",
                       param=param) from None  # fmt: skip
    except (ValueError, KeyError, TypeError, AttributeError, AssertionError, RecursionError,
            NotImplementedError, IndexError, re.error) as exc:  # fmt: skip
        raise APIError(400, f"The JSON schema cannot be used: {exc!s}"[:500], param=param) from None
    if len(grammar) > MAX_GRAMMAR_CHARS:
        raise APIError(400, "The JSON schema is too large to enforce; simplify it.", param=param)
    return grammar


def _check_bounds(node: Any, param: str, depth: int) -> None:
    if depth > MAX_SCHEMA_DEPTH:
        raise APIError(400, "The JSON schema is nested too deeply.", param=param)
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _COUNTS and isinstance(value, int) and not 0 <= value <= MAX_REPEAT:
                raise APIError(
                    400,
                    f"The JSON schema's {key} of {value} is outside 0-"
                    f"{MAX_REPEAT}; the output could not be enforced.",
                    param=param,
                )
            if key == "$ref" and isinstance(value, str) and not value.startswith("#"):
                raise APIError(
                    400,
                    "The JSON schema refers outside itself ($ref to "
                    f"{value[:80]!r}); only local references (#/...) are taken.",
                    param=param,
                )
            _check_bounds(value, param, depth + 1)
    elif isinstance(node, list):
        for item in node:
            _check_bounds(item, param, depth + 1)
