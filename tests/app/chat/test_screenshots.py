"""The chat page with a markdown reply (a highlighted code block, collapsed reasoning) and a few
saved conversations, grabbed as a picture. It always runs (into a temporary folder); with
HEARTH_SCREENSHOTS=1 it rewrites docs/screenshots/chat-markdown.png."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from app.chat.view import ChatView
from app.common.theme import apply_theme
from app.shell.main_window import MainWindow
from app.shell.pages import CHAT, PageSpec
from engine.chat.store import ConversationStore
from engine.runtime import protocol as p
from tests.app.conftest import WAIT_MS, client_of, load_fake_model
from tests.app.fake_engine import done

SCREENSHOT = Path(__file__).resolve().parents[3] / "docs" / "screenshots" / "chat-markdown.png"
REPLY = """<think>The user wants a small function; a dict keeps the counts.</think>Here is a \
short function that counts **word frequencies**, ignoring case:

```python
from collections import Counter

def word_counts(text: str) -> dict[str, int]:
    \"\"\"How often each word appears.\"\"\"
    words = text.lower().split()
    return dict(Counter(words))
```

Call it with any string, e.g. `word_counts("the cat and the hat")` gives `{'the': 2, ...}`.
"""


def test_chat_markdown_screenshot(qtbot, bridge, tmp_path):
    target = SCREENSHOT if os.environ.get("HEARTH_SCREENSHOTS") == "1" else tmp_path / "chat-md.png"
    apply_theme(QApplication.instance())
    store = ConversationStore.open(tmp_path / "chats.sqlite3")
    for title in ("Trip ideas for May", "Sourdough schedule", "Explain KV caching"):
        chat_row = store.create_conversation(title)
        store.add_message(chat_row.id, "user", title)
    pages = [PageSpec(CHAT, lambda window: ChatView(window.bridge, store=store))]
    window = MainWindow(bridge, pages=pages)
    qtbot.addWidget(window)
    window.resize(1180, 760)
    window.show()
    client = load_fake_model(qtbot, bridge, tmp_path / "Qwen3-8B-Q4_K_M.gguf")
    chat = window.chat_view
    chat.input.setPlainText("Write a Python function that counts words in a text.")
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    request_id = client_of(bridge).commands[-1][1][0]
    client.emit(p.TokenText(request_id=request_id, text=REPLY))
    client.emit(done(request_id, n_generated=96))
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT_MS)
    qtbot.wait(100)

    target.parent.mkdir(parents=True, exist_ok=True)
    assert window.grab().save(str(target))
    image = QImage(str(target))
    colours = {image.pixel(x, y) for x in range(420, 1100, 5) for y in range(100, 600, 5)}
    assert len(colours) > 20  # not a blank grab: highlighted code is many colours
    store.close()
