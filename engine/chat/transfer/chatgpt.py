"""A ChatGPT data export's conversations.json: a list of conversations, each a tree of nodes
(`mapping`: node id -> {"parent", "children", "message"}) whose `current_node` is the end of the
branch ChatGPT showed.

What a person saw becomes a Hearth conversation: user and assistant messages of text (the
branch ChatGPT showed is the shown branch; regenerated replies and edited questions become
versions, as in Hearth). What ChatGPT keeps but does not show as chat text is left out and
counted: tool calls and their output, reasoning, hidden instructions, and images (the export
keeps those as separate files). A reply ChatGPT wrote in several pieces around tool calls is
joined into one message.

The parent pointers are the tree (the `children` lists only repeat them); a node whose parent is
missing, or a loop of parents, refuses the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.chat.store import Conversation, StoredMessage
from engine.chat.transfer.reading import parse_json
from engine.chat.transfer.records import (
    MAX_CONVERSATIONS,
    MAX_MESSAGES_PER_CHAT,
    MAX_TEXT_CHARS,
    ChatRecord,
    ImportedChats,
    Progress,
    clean_text,
    clean_title,
    expect,
    kind_of,
    time_field,
    where,
)

MAX_NODES = 4 * MAX_MESSAGES_PER_CHAT  # a message's tool calls, reasoning... are nodes too
TITLE_CHARS = 48
_TEXT_TYPES = ("text", "multimodal_text")
_IMAGE_PARTS = ("image_asset_pointer", "audio_asset_pointer", "video_container_asset_pointer")


@dataclass
class _Counts:
    hidden: int = 0  # nodes with a message that is not chat text
    images: int = 0


@dataclass(frozen=True)
class _Visible:
    role: str
    text: str
    model: str
    created_at: float


def looks_like_chatgpt(document: Any) -> bool:
    """A list of conversations with a `mapping` (an empty list, too)."""
    return isinstance(document, list) and (
        not document or (isinstance(document[0], dict) and "mapping" in document[0])
    )


def parse_chatgpt_json(
    data: bytes, *, name: str = "The file", progress: Progress | None = None
) -> ImportedChats:
    """The conversations of a ChatGPT conversations.json; TransferError says why not."""
    return read_chatgpt_document(parse_json(data, name), name=name, progress=progress)


def read_chatgpt_document(
    document: Any, *, name: str = "The file", progress: Progress | None = None
) -> ImportedChats:
    expect(
        looks_like_chatgpt(document),
        f"{name} is not a ChatGPT export's conversations.json (a list of conversations, each "
        "with a “mapping” of messages).",
    )
    expect(
        len(document) <= MAX_CONVERSATIONS,
        f"{name} has {len(document):,} chats, more than the {MAX_CONVERSATIONS:,} one import "
        "takes.",
    )
    counts = _Counts()
    records = []
    for index, chat in enumerate(document):
        record = _read_conversation(chat, index, counts)
        if record.messages:
            records.append(record)
        if progress is not None:
            progress(index + 1, len(document))
    notes = []
    if len(records) < len(document):
        notes.append(f"{len(document) - len(records):,} chat(s) with no text were left out.")
    if counts.hidden:
        notes.append(
            f"{counts.hidden:,} part(s) ChatGPT does not show as chat text (tool calls and "
            "their output, reasoning, hidden instructions) were left out."
        )
    if counts.images:
        notes.append(
            f"{counts.images:,} image(s) were left out: the export keeps them as separate files."
        )
    return ImportedChats("ChatGPT", tuple(records), tuple(notes))


def _read_conversation(chat: Any, index: int, counts: _Counts) -> ChatRecord:
    at = where(index)
    expect(isinstance(chat, dict), f"{at} should be an object, not {kind_of(chat)}.")
    mapping = chat.get("mapping")
    expect(isinstance(mapping, dict), f"{at}: “mapping” should be an object.")
    expect(
        len(mapping) <= MAX_NODES,
        f"{at} has {len(mapping):,} nodes, more than the {MAX_NODES:,} a chat may have.",
    )
    parents = _parents(mapping, at)
    order = _tree_order(mapping, parents, at)
    default_model = chat.get("default_model_slug")
    default_model = default_model if isinstance(default_model, str) else ""

    visible = {}
    for node_id in order:
        seen = _visible(mapping[node_id].get("message"), f"{at}, node {node_id[:40]!r}", counts)
        if seen is not None:
            visible[node_id] = seen

    # Each kept node under its nearest kept ancestor; a piece of a reply (same role, the only
    # kept child of its ancestor) joins that ancestor.
    nearest: dict[str, str | None] = {}  # node -> the kept node at or above it
    above: dict[str, str | None] = {}  # kept node -> its nearest kept ancestor
    for node_id in order:
        parent = parents[node_id]
        up = nearest[parent] if parent is not None else None
        above[node_id] = up
        nearest[node_id] = node_id if node_id in visible else up
    kept_children: dict[str | None, int] = {}
    for node_id in visible:
        kept_children[above[node_id]] = kept_children.get(above[node_id], 0) + 1

    joined_into: dict[str, str] = {}  # kept node -> the message it is part of
    texts: dict[str, list[str]] = {}
    system_prompts: dict[str, str] = {}
    for node_id in order:
        if node_id not in visible:
            continue
        seen, up = visible[node_id], above[node_id]
        head = joined_into.get(up) if up is not None else None
        if seen.role == "system":
            system_prompts[node_id] = seen.text
            joined_into[node_id] = head  # type: ignore[assignment]  # a system node is no message
            continue
        if head is not None and visible[head].role == seen.role and kept_children[up] == 1:
            joined_into[node_id] = head
            texts[head].append(seen.text)
        else:
            joined_into[node_id] = node_id
            texts[node_id] = [seen.text]

    number = {node_id: n for n, node_id in enumerate(texts, 1)}
    expect(
        len(number) <= MAX_MESSAGES_PER_CHAT,
        f"{at} has {len(number):,} messages, more than the {MAX_MESSAGES_PER_CHAT:,} a chat may "
        "have.",
    )
    messages = []
    for node_id, parts in texts.items():
        up = above[node_id]
        parent = joined_into.get(up) if up is not None else None
        content = "\n\n".join(parts)
        expect(
            len(content) <= MAX_TEXT_CHARS,
            f"{at}: a message is longer than {MAX_TEXT_CHARS:,} characters.",
        )
        seen = visible[node_id]
        messages.append(
            StoredMessage(
                id=number[node_id],
                conversation_id=0,
                parent_id=number.get(parent) if parent is not None else None,
                role=seen.role,
                content=content,
                model=seen.model or (default_model if seen.role == "assistant" else ""),
                created_at=seen.created_at,
            )
        )

    shown = _shown_path(chat.get("current_node"), mapping, parents, order)
    leaf_node = next((joined_into[n] for n in reversed(shown) if joined_into.get(n)), None)
    system_prompt = next((system_prompts[n] for n in shown if n in system_prompts), "")
    first_user = next((m.content for m in messages if m.role == "user"), "")
    title = chat.get("title")
    title = clean_title(title) if isinstance(title, str) else ""
    created = time_field(chat, "create_time", at)
    conversation = Conversation(
        id=0,
        title=title or _title_from(first_user) or "Imported chat",
        system_prompt=system_prompt,
        settings={},
        created_at=created,
        updated_at=time_field(chat, "update_time", at, default=created),
        active_leaf_id=number.get(leaf_node) if leaf_node else (len(messages) or None),
    )
    return ChatRecord(conversation, tuple(messages))


def _parents(mapping: Mapping[str, Any], at: str) -> dict[str, str | None]:
    parents: dict[str, str | None] = {}
    for node_id, node in mapping.items():
        expect(isinstance(node, dict), f"{at}: node {node_id[:40]!r} should be an object.")
        parent = node.get("parent")
        expect(
            parent is None or (isinstance(parent, str) and parent in mapping),
            f"{at}: node {node_id[:40]!r} names a parent that is not in the chat.",
        )
        parents[node_id] = parent
    return parents


def _tree_order(
    mapping: Mapping[str, Any], parents: Mapping[str, str | None], at: str
) -> list[str]:
    """Every node, each after its parent; siblings oldest first. Refuses a loop of parents."""
    children: dict[str | None, list[str]] = {}
    for node_id, parent in parents.items():
        children.setdefault(parent, []).append(node_id)
    for siblings in children.values():
        siblings.sort(key=lambda n: _created(mapping[n]))
    order: list[str] = []
    stack = list(reversed(children.get(None, [])))
    while stack:
        node_id = stack.pop()
        order.append(node_id)
        stack.extend(reversed(children.get(node_id, [])))
    expect(
        len(order) == len(mapping),
        f"{at}: its messages' parents form a loop, so it is not a conversation.",
    )
    return order


def _created(node: Mapping[str, Any]) -> float:
    message = node.get("message")
    value = message.get("create_time") if isinstance(message, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _shown_path(
    current: Any,
    mapping: Mapping[str, Any],
    parents: Mapping[str, str | None],
    order: list[str],
) -> list[str]:
    """The nodes from the root to `current_node` (else to the last node), root first."""
    node = current if isinstance(current, str) and current in mapping else None
    if node is None and order:
        node = order[-1]
    path = []
    while node is not None:
        path.append(node)
        node = parents[node]
    return path[::-1]


def _visible(message: Any, at: str, counts: _Counts) -> _Visible | None:
    """The chat text a node's message shows, or None (counted) when it shows none."""
    if message is None:
        return None
    expect(isinstance(message, dict), f"{at}: “message” should be an object or null.")
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    metadata = message.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    content = message.get("content")
    expect(isinstance(content, dict), f"{at}: “content” should be an object.")
    recipient = message.get("recipient", "all")
    hidden = metadata.get("is_visually_hidden_from_conversation") is True
    if (
        role not in ("user", "assistant", "system")
        or hidden
        or (role == "assistant" and recipient not in ("all", None))
        or content.get("content_type") not in _TEXT_TYPES
    ):
        # ChatGPT's own hidden system message starts every chat: not worth a mention.
        if role is not None and not (role == "system" and hidden):
            counts.hidden += 1
        return None
    parts = content.get("parts", [])
    expect(isinstance(parts, list), f"{at}: “content.parts” should be a list.")
    texts = []
    for part in parts:
        if isinstance(part, str):
            expect(len(part) <= MAX_TEXT_CHARS, f"{at}: a message is too long.")
            texts.append(part)
        elif isinstance(part, dict):
            counts.images += part.get("content_type") in _IMAGE_PARTS
        else:
            expect(False, f"{at}: a part of “content.parts” is {kind_of(part)}.")
    text = clean_text("\n".join(texts)).strip()
    if not text:
        return None
    model = metadata.get("model_slug")
    created = message.get("create_time")
    return _Visible(
        role=role,
        text=text,
        model=clean_title(model) if isinstance(model, str) else "",
        created_at=time_field(message, "create_time", at) if created is not None else 0.0,
    )


def _title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"
