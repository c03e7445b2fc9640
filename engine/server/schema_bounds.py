"""Bounds on what a stranger's JSON schema makes llama.cpp do, checked before translation.

Two costs are not visible in the schema's size:

- A `pattern` is translated inline: `a{1000000000}` becomes a billion grammar items (gigabytes
  and seconds in the translation itself, before any size check could run), and nested groups
  multiply (`(a{1000}){1000}`). `pattern_size` bounds the expanded size from the pattern's text.
- llama.cpp's grammar sampler follows every parse the grammar allows at once, one stack each.
  Alternatives (`anyOf`, `oneOf`, a list of types) that begin with the same kind of JSON value
  keep several parses alive until they differ, and nesting multiplies them: an alternative of
  two arrays, each holding the same alternative again, 30 levels deep (a few `$defs`, 1 kB) is a
  billion stacks, and the sampler works through them inside one C call that nothing can
  interrupt. `parallel_parses` bounds that number; an ambiguous alternative on a recursive
  `$ref` has no bound at all and is refused outright.
"""

from __future__ import annotations

import re
from typing import Any

MAX_PATTERN_ITEMS = 10_000  # grammar items one `pattern` may expand to
MAX_PATTERN_REPEAT = 1000  # the largest count in `{n}`, `{n,m}` of a pattern
# Grammar stacks the sampler may have to follow at once. On the starter model (2 CPU cores) the
# slowest token took 0.17 s with 16, 0.39 s with 32, 1.0 s with 64 and 2.4 s with 256; nested
# deeper, single tokens took minutes (docs/decisions/2026-11-28-hostile-requests.md).
MAX_PARALLEL_PARSES = 16

ANY = frozenset({"object", "array", "string", "number", "boolean", "null"})
_TYPE_KIND = {"integer": "number", "number": "number", "object": "object", "array": "array",
              "string": "string", "boolean": "boolean", "null": "null"}  # fmt: skip
_REPEAT = re.compile(r"\{(\d*)(,?)(\d*)\}")


class SchemaTooCostly(ValueError):
    """The message names the bound and the schema's part that passes it."""


# -- patterns -----------------------------------------------------------------------------------


def pattern_size(pattern: str) -> int:
    """An upper bound on the grammar items `pattern` expands to; SchemaTooCostly past a count
    over MAX_PATTERN_REPEAT. Groups multiply by their quantifier; alternatives add."""
    stack: list[int] = [0]
    last = 0  # size of the item a quantifier would apply to
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            last, i = 1, i + 2
            stack[-1] += 1
            continue
        if c == "[":
            end = _class_end(pattern, i)
            last, i = 1, end + 1
            stack[-1] += 1
            continue
        if c == "(":
            stack.append(0)
            i += 1
            continue
        if c == ")":
            inner = stack.pop() if len(stack) > 1 else stack[-1]
            last = max(inner, 1)
            stack[-1] += last
            i += 1
            continue
        if c == "{" and (match := _REPEAT.match(pattern, i)) and (match[1] or match[3]):
            low = int(match[1] or 0)
            high = int(match[3]) if match[3] else (low + 1 if match[2] else low)
            if max(low, high) > MAX_PATTERN_REPEAT:
                raise SchemaTooCostly(
                    f"The pattern's repetition {match[0][:40]} is over the limit of "
                    f"{MAX_PATTERN_REPEAT}; use a smaller count."
                )
            stack[-1] += last * (max(low, high, 1) - 1)
            last *= max(low, high, 1)
            i = match.end()
            continue
        if c in "*+?":
            stack[-1] += last  # an optional copy and a loop: twice the item at most
            i += 1
            continue
        if c not in "|^$":
            last = 1
            stack[-1] += 1
        i += 1
        if sum(stack) > MAX_PATTERN_ITEMS:
            break
    total = sum(stack)
    if total > MAX_PATTERN_ITEMS:
        raise SchemaTooCostly(
            f"The pattern {pattern[:40]!r} expands to more grammar items than the limit of "
            f"{MAX_PATTERN_ITEMS:,}; simplify it."
        )
    return total


def _class_end(pattern: str, start: int) -> int:
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i


# -- ambiguity ----------------------------------------------------------------------------------


def check_schema_costs(schema: dict[str, Any]) -> None:
    """SchemaTooCostly for a pattern too large or alternatives too ambiguous to sample."""
    for pattern in _patterns(schema):
        pattern_size(pattern)
    parses = _Parses(schema).of(schema, ())
    if parses > MAX_PARALLEL_PARSES:
        raise SchemaTooCostly(
            f"The JSON schema's alternatives (anyOf, oneOf) that begin alike, nested "
            f"in each other, make {_shown(parses)} parses to follow at once, over the limit of "
            f"{MAX_PARALLEL_PARSES}; make the alternatives begin differently (other types, "
            "const fields first) or nest them less."
        )


def _shown(n: float) -> str:
    return "unboundedly many" if n == float("inf") else f"{int(n):,}"


def _patterns(node: Any):
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            value = item.get("pattern")
            if isinstance(value, str):
                yield value
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


class _Parses:
    """How many parses of one value a schema node can keep alive at once (1: unambiguous).

    `refs` is the chain of `$ref`s being expanded, each with whether an ambiguous alternative
    was entered since: coming back to a `$ref` through one is a recursion that multiplies the
    parses at every level (infinite); coming back without one is an ordinary recursive schema
    (a tree), counted once."""

    MAX_STEPS = 100_000

    def __init__(self, root: dict[str, Any]):
        self.root = root
        self.memo: dict[tuple, float] = {}
        self.steps = 0

    def of(self, node: Any, refs: tuple[tuple[str, bool], ...]) -> float:
        self.steps += 1
        if self.steps > self.MAX_STEPS:
            raise SchemaTooCostly("The JSON schema is too complex to check; simplify it.")
        if not isinstance(node, dict):
            return 1.0
        ref = node.get("$ref")
        if isinstance(ref, str):
            for seen, ambiguous in refs:
                if seen == ref:
                    return float("inf") if ambiguous else 1.0
            key = (ref, refs)
            if key not in self.memo:
                self.memo[key] = self.of(self._resolve(ref), (*refs, (ref, False)))
            return self.memo[key]
        inner = 1.0
        for key in ("properties", "patternProperties"):
            values = node.get(key)
            if isinstance(values, dict):
                inner = max([inner, *(self.of(v, refs) for v in values.values())])
        for key in ("items", "additionalProperties", "contains", "not"):
            inner = max(inner, self.of(node.get(key), refs))
        for key in ("prefixItems", "allOf"):
            values = node.get(key)
            if isinstance(values, list):
                inner = max([inner, *(self.of(v, refs) for v in values)])
        alternatives = _alternatives(node)
        if not alternatives:
            return inner
        kinds = [self.kinds(a) for a in alternatives]
        by_kind: dict[str, float] = {}
        for i, alternative in enumerate(alternatives):
            shared = any(kinds[i] & kinds[j] for j in range(len(kinds)) if j != i)
            chain = tuple((r, True) for r, _ in refs) if shared else refs
            parses = self.of(alternative, chain)
            for kind in kinds[i]:
                by_kind[kind] = by_kind.get(kind, 0.0) + parses
        return max(inner, *by_kind.values()) if by_kind else inner

    def kinds(self, node: Any, refs: tuple[str, ...] = ()) -> frozenset[str]:
        """The kinds of JSON value (object, array, ...) `node` may begin with."""
        if not isinstance(node, dict):
            return ANY if node is True or node is None else frozenset()
        ref = node.get("$ref")
        if isinstance(ref, str):
            return ANY if ref in refs else self.kinds(self._resolve(ref), (*refs, ref))
        if "const" in node:
            return frozenset({_value_kind(node["const"])})
        if isinstance(node.get("enum"), list):
            return frozenset(_value_kind(v) for v in node["enum"])
        kind = node.get("type")
        if isinstance(kind, str):
            return frozenset({_TYPE_KIND.get(kind, kind)})
        if isinstance(kind, list):
            return frozenset(_TYPE_KIND.get(k, str(k)) for k in kind)
        alternatives = _alternatives(node)
        if alternatives:
            return frozenset().union(*(self.kinds(a, refs) for a in alternatives))
        if isinstance(node.get("allOf"), list) and node["allOf"]:
            return self.kinds(node["allOf"][0], refs)
        if "properties" in node or "additionalProperties" in node:
            return frozenset({"object"})
        if "items" in node or "prefixItems" in node:
            return frozenset({"array"})
        return ANY

    def _resolve(self, ref: str) -> Any:
        if ref == "#":
            return self.root
        node: Any = self.root
        for part in ref.removeprefix("#/").split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                return {}  # the translation reports a broken reference itself
            node = node[part]
        return node


def _alternatives(node: dict[str, Any]) -> list[Any]:
    return [a for key in ("anyOf", "oneOf") if isinstance(node.get(key), list) for a in node[key]]


def _value_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
