"""A small ChatGPT conversations.json built the way the export writes one: a root node with no
message, ChatGPT's hidden system message, a question asked twice (edited), a reply regenerated,
a reply in two pieces around a tool call, an image, and a reasoning summary."""

from __future__ import annotations

from typing import Any

T0 = 1_700_000_000.0


def node(node_id, parent, message=None, children=()) -> dict[str, Any]:
    return {"id": node_id, "parent": parent, "children": list(children), "message": message}


def message(role, text=None, *, t=0.0, content=None, hidden=False, recipient="all", model=None):
    metadata: dict[str, Any] = {}
    if hidden:
        metadata["is_visually_hidden_from_conversation"] = True
    if model:
        metadata["model_slug"] = model
    return {
        "id": f"m-{role}-{t}",
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": T0 + t if t else None,
        "content": content or {"content_type": "text", "parts": [text]},
        "status": "finished_successfully",
        "metadata": metadata,
        "recipient": recipient,
    }


def conversation(title="Trip ideas", current="a3") -> dict[str, Any]:
    image = {"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"}
    nodes = [
        node("root", None),
        node("sys", "root", message("system", "", hidden=True)),
        node("q1", "sys", message("user", "Where to in May?", t=1)),
        node("a1", "q1", message("assistant", "Lisbon.", t=2, model="gpt-4o")),
        node("a1b", "q1", message("assistant", "Porto.", t=3, model="gpt-4o")),
        node(
            "q2",
            "a1",
            message(
                "user",
                t=4,
                content={"content_type": "multimodal_text", "parts": [image, "Like this?"]},
            ),
        ),
        node("think", "q2", message("assistant", t=5, content={"content_type": "thoughts"})),
        node("a2", "think", message("assistant", "Let me check.", t=6, model="gpt-4o")),
        node("call", "a2", message("assistant", "search(...)", t=7, recipient="browser")),
        node("result", "call", message("tool", "results", t=8)),
        node("a3", "result", message("assistant", "Yes, Lisbon in May.", t=9, model="gpt-4o")),
        node("q1b", "sys", message("user", "Where to in April?", t=10)),
    ]
    return {
        "title": title,
        "create_time": T0,
        "update_time": T0 + 10,
        "mapping": {n["id"]: n for n in nodes},
        "current_node": current,
        "default_model_slug": "gpt-4o",
        "conversation_id": "c-1",
    }
