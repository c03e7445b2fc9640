"""Tool calling: offering tools to the model, forcing a call, and reading calls from its reply.

A model whose chat template renders `tools` is given them there, and answers in its own format.
Others get a system message that describes the tools and asks for Hermes-style calls
(`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`), the format most open models were
tuned on. `parse_tool_calls` reads the formats in use: Hermes/Qwen tags, Mistral's
`[TOOL_CALLS]` list, and a bare JSON object or list (Llama 3.1 writes `"parameters"`).

`tool_choice` "required" or a named function constrains the reply with a grammar to a JSON
call of one of the offered tools, with arguments following that tool's parameter schema.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from engine.server.errors import APIError
from engine.server.structured_output import schema_grammar

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_MISTRAL = "[TOOL_CALLS]"


def tool_functions(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `function` part of each tool, checked."""
    functions = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type", "function") != "function" or not isinstance(function, dict):
            raise APIError(
                400,
                f"tools[{i}] must be {{'type': 'function', 'function': {{...}}}}.",
                param=f"tools[{i}]",
            )
        name = function.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name):
            raise APIError(
                400,
                f"tools[{i}].function.name must be 1-64 letters, digits, '_', '.' or '-'.",
                param=f"tools[{i}].function.name",
            )
        params = function.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(params, dict):
            raise APIError(
                400,
                f"tools[{i}].function.parameters must be a JSON schema object.",
                param=f"tools[{i}].function.parameters",
            )
        functions.append({**function, "parameters": params})
    return functions


def tools_system_text(functions: list[dict[str, Any]]) -> str:
    listed = "\n".join(json.dumps(f, ensure_ascii=False) for f in functions)
    return (
        "You can call these tools:\n"
        f"<tools>\n{listed}\n</tools>\n"
        "To call a tool, answer with only this, once per call:\n"
        '<tool_call>\n{"name": "TOOL NAME", "arguments": {ARGUMENTS AS JSON}}\n</tool_call>'
    )


def forced_call_grammar(functions: list[dict[str, Any]], name: str | None) -> str:
    """A grammar for one JSON call of `name` (or of any offered tool when None)."""
    chosen = [f for f in functions if name is None or f["name"] == name]
    if not chosen:
        raise APIError(
            400,
            f"tool_choice names {name!r}, which is not among the tools offered.",
            param="tool_choice",
        )
    variants = [
        {
            "type": "object",
            "properties": {"name": {"const": f["name"]}, "arguments": f["parameters"]},
            "required": ["name", "arguments"],
        }
        for f in chosen
    ]
    schema = variants[0] if len(variants) == 1 else {"anyOf": variants}
    return schema_grammar(schema, param="tools")


def parse_tool_calls(text: str) -> list[dict[str, Any]] | None:
    """The calls in a reply, OpenAI-shaped (`arguments` as JSON text); None when it has none."""
    stripped = text.strip()
    candidates: list[Any] = []
    if "<tool_call>" in stripped:
        candidates = [_load(body) for body in _TAGGED.findall(stripped)]
    elif stripped.startswith(_MISTRAL):
        loaded = _load(stripped[len(_MISTRAL) :])
        candidates = loaded if isinstance(loaded, list) else [loaded]
    elif stripped.startswith(("{", "[")):
        loaded = _load(stripped)
        candidates = loaded if isinstance(loaded, list) else [loaded]
    calls = []
    for item in candidates:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        arguments = item.get("arguments", item.get("parameters", {}))
        if isinstance(arguments, str):
            arguments = _load(arguments) if arguments.strip() else {}
        if not isinstance(arguments, dict):
            return None
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": item["name"], "arguments": json.dumps(arguments)},
            }
        )
    return calls or None


def may_begin_tool_call(text: str) -> bool:
    """Whether a reply that starts with `text` may still turn out to be a tool call (streaming
    holds such text back until it knows)."""
    head = text.lstrip()
    if not head:
        return True
    return any(
        head.startswith(marker) or marker.startswith(head)
        for marker in ("<tool_call>", _MISTRAL, "{", "[")
    )


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
