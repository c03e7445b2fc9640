"""Images in the chat box: dropped or pasted, shown as thumbnails above it, sent with the message
(as the engine's base64 images), kept with the chat, and painted as thumbnails in the message."""

from __future__ import annotations

import base64

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QImage
from PySide6.QtWidgets import QLabel

from app.chat.attachments import IMAGE_SIDE, THUMB_SIDE, attachment_from_image
from app.chat.conversation_model import MessageRole
from engine.chat.store import Attachment
from engine.runtime import protocol as p
from testkit.tiny_vision import png_from_rows, tiny_png
from tests.app.conftest import load_fake_model


def _files(*paths) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path)) for path in paths])
    return mime


def _drop(widget, mime: QMimeData) -> QDropEvent:
    event = QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime,
                       Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)  # fmt: skip
    widget.dropEvent(event)
    return event


def _enter(widget, mime: QMimeData) -> bool:
    event = QDragEnterEvent(QPoint(5, 5), Qt.DropAction.CopyAction, mime,
                            Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)  # fmt: skip
    widget.dragEnterEvent(event)
    return event.isAccepted()


def test_a_dropped_image_file_waits_as_a_thumbnail_and_a_model_file_is_left_alone(chat, tmp_path):
    image = tmp_path / "cat.png"
    image.write_bytes(tiny_png(40, 30))
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    assert _enter(chat.input, _files(image))
    assert not _enter(chat.input, _files(model))  # the main window opens it as a model
    _drop(chat.input, _files(image))
    [button] = chat.attachments.buttons()
    assert chat.attachments.isVisibleTo(chat)
    assert chat.attachments.attachments() == (
        Attachment("image", "image/png", "cat.png", image.read_bytes()),
    )
    assert button.iconSize().width() == THUMB_SIDE and not button.icon().isNull()
    button.click()  # a click takes it away again
    assert chat.attachments.attachments() == () and not chat.attachments.isVisibleTo(chat)


def test_a_pasted_picture_is_attached_scaled_and_encoded(chat):
    mime = QMimeData()
    picture = QImage(IMAGE_SIDE * 2, 100, QImage.Format.Format_RGB32)
    picture.fill(Qt.GlobalColor.darkGreen)
    mime.setImageData(picture)
    assert chat.input.canInsertFromMimeData(mime)
    chat.input.insertFromMimeData(mime)
    [attached] = chat.attachments.attachments()
    assert attached.mime_type == "image/jpeg" and attached.data[:3] == b"\xff\xd8\xff"
    assert QImage.fromData(attached.data).width() == IMAGE_SIDE
    assert chat.input.toPlainText() == ""  # the picture is not pasted as text


def test_a_decompression_bomb_is_refused_before_qt_decodes_it(chat, tmp_path):
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png_from_rows(1, 1, b"\0\0\0\0", declared=(60_000, 60_000)))
    _drop(chat.input, _files(bomb))
    assert chat.attachments.attachments() == ()
    assert chat.notice.isVisibleTo(chat)
    assert "60,000×60,000" in chat.notice.findChild(QLabel, "bannerText").text()


def test_images_go_with_the_message_stay_with_the_chat_and_show_as_thumbnails(
    qtbot, bridge, chat, tmp_path
):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    image = tmp_path / "cat.png"
    image.write_bytes(tiny_png(160, 120))
    _drop(chat.input, _files(image))
    chat.input.setPlainText("What is this?")
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    (_, (_rid, messages, _sampling, _max)) = client.commands[-1]
    assert messages == (
        p.ChatMessage(role="user", content="What is this?",
                      images=(base64.b64encode(image.read_bytes()).decode(),)),
    )  # fmt: skip
    assert chat.attachments.attachments() == ()  # sent: the box is empty again
    # kept with the chat: reopened from the store, the message still has its image
    chat_id = chat.session.conversation_id
    chat.new_chat()
    chat.open_conversation(chat_id)
    entry = chat.model.entry(0)
    assert [a.name for a in entry.images] == ["cat.png"]
    index = chat.model.index(0)
    rect = chat.transcript.visualRect(index)
    [thumb] = chat.delegate.thumbnail_rects(index, rect, chat.transcript.font())
    assert (thumb.width(), thumb.height()) == (
        THUMB_SIDE,
        THUMB_SIDE * 3 // 4,
    )  # scaled down, never up
    bubble_top = chat.delegate.text_rect(index, rect, chat.transcript.font()).top()
    assert thumb.bottom() < bubble_top  # above the bubble, not over the text
    assert index.data(MessageRole).images == entry.images


def test_an_image_sent_alone_is_a_question_too(qtbot, bridge, chat, tmp_path):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    chat.attachments.add(attachment_from_image(QImage.fromData(tiny_png(8, 8)), "x.png"))
    chat.send()
    (_, (_rid, messages, _s, _m)) = client.commands[-1]
    assert messages[0].content == "" and len(messages[0].images) == 1
    assert chat.session.store.conversation(chat.session.conversation_id).title == "Image"


def test_a_hostile_image_in_an_imported_chat_is_never_decoded(qtbot):
    from app.chat.attachments import thumbnail

    bomb = png_from_rows(1, 1, b"\0\0\0\0", declared=(60_000, 60_000))
    assert thumbnail(Attachment("image", "image/png", "bomb.png", bomb)).isNull()
    assert not thumbnail(Attachment("image", "image/png", "ok.png", tiny_png(9, 9))).isNull()


def test_a_long_chat_sends_the_most_recent_images_that_one_request_takes():
    from app.chat.conversation_model import ChatEntry, images_sent
    from engine.chat.images import MAX_IMAGES

    def ask(n: int) -> ChatEntry:
        return ChatEntry("user", "?", images=tuple(
            Attachment("image", "image/png", f"{n}-{k}", b"x") for k in range(3)))  # fmt: skip

    entries = [ask(n) for n in range(4)]  # 12 images, 8 go
    sent = images_sent(entries)
    assert [len(s) for s in sent] == [0, 2, 3, 3]
    assert sum(len(s) for s in sent) == MAX_IMAGES
    assert sent[1][0].name == "1-0"  # a message's first images before its later ones


def test_the_box_says_images_are_taken_when_the_model_sees(qtbot, bridge, chat, tmp_path):
    from dataclasses import replace

    from tests.app.fake_engine import model_loaded

    load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    assert "image" not in chat.input.placeholderText()
    bridge.model_loaded.emit(replace(model_loaded(str(tmp_path / "m.gguf")), vision=True))
    assert "drop or paste an image" in chat.input.placeholderText()
