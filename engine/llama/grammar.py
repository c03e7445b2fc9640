"""JSON schemas as GBNF grammars, by llama.cpp's own translation as llama-cpp-python ships it
(`json_schema_to_gbnf`), corrected where that port lags the C++ one."""

from __future__ import annotations

from llama_cpp.llama_grammar import json_schema_to_gbnf

# The port lets control characters into JSON strings (llama.cpp's C++ translation does not), and
# a newline inside a string fails json.loads.
_PORT_CHAR = 'char ::= [^"\\\\]'
_JSON_CHAR = 'char ::= [^"\\\\\\x7F\\x00-\\x1F]'


def json_schema_grammar(schema_json: str) -> str:
    """The grammar for JSON text following the schema; raises what the translation raises for
    a schema it cannot take (ValueError, KeyError, TypeError, ...)."""
    return json_schema_to_gbnf(schema_json).replace(_PORT_CHAR, _JSON_CHAR)
