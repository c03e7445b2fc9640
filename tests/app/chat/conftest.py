"""Fixtures of the chat page's tests: a conversation store on disk and a chat page over it."""

from __future__ import annotations

import pytest

from app.chat.view import ChatView
from engine.chat.store import ConversationStore
from tests.app.conftest import shown


@pytest.fixture
def store_path(tmp_path):
    return tmp_path / "chats.sqlite3"


@pytest.fixture
def store(store_path):
    s = ConversationStore.open(store_path)
    yield s
    s.close()


def _chat(qtbot, bridge, store) -> ChatView:
    return shown(qtbot, ChatView(bridge, store=store), 1000, 600)


@pytest.fixture
def chat(qtbot, bridge, store) -> ChatView:
    return _chat(qtbot, bridge, store)
