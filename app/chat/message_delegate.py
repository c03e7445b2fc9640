"""Paints one chat message as a bubble: the user's on the right, the assistant's on the left with
its stats line underneath.

A message with several versions gets a `‹ 2/3 ›` switch beside its label (version_switch.py).
A message's images are painted as thumbnails between its label and its bubble (attachments.py
decodes them, after checking their headers).
The row under the mouse gets a selectable copy of its text (text_selection.py).

Colours are blended from the widget's palette rather than fixed, so the transcript follows the
system's light or dark theme. Laid-out text is cached per row and version: while a reply streams,
the list view asks every row for its size on each relayout, and re-laying out a thousand messages
30 times a second would cost more than the decode it displays.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import (
    QEvent,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QPointF,
    QRect,
    QRectF,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QColor,
    QFont,
    QFontMetrics,
    QGuiApplication,
    QPainter,
    QPalette,
    QPixmap,
    QTextDocument,
    QTextOption,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
)

from app.chat.attachments import THUMB_SIDE, thumbnail
from app.chat.conversation_model import ROLE_USER, ChatEntry, MessageRole
from app.chat.message_buttons import (
    MessageButtons,
    actions_for,
    message_buttons,
    paint_message_buttons,
)
from app.chat.message_markdown import COPY_SCHEME, THINK_HREF, Colors, render_markdown
from app.chat.text_selection import MessageTextView, SelectableText
from app.chat.version_switch import VersionSwitch, paint_version_switch, version_switch
from app.common.theme import blend

SIDE_MARGIN = 18
ROW_SPACING = 14
PADDING_X = 14
PADDING_Y = 10
LABEL_GAP = 4
FOOTER_GAP = 5
RADIUS = 12
LIST_INDENT = 22
THUMB_GAP = 6  # between thumbnails, and under them
USER_MAX_FRACTION = 0.72
ASSISTANT_MAX_FRACTION = 0.86
WAITING_TEXT = "…"

AnyIndex = QModelIndex | QPersistentModelIndex


@dataclass
class _RowLayout:
    version: int
    row_width: int
    document: QTextDocument
    size: QSize
    code_blocks: tuple[str, ...] = ()
    show_thinking: bool = False
    colors: Colors | None = None  # the palette's colours it was made with
    thumbnails: tuple[QPixmap, ...] = ()  # the message's images, decoded once per layout


def _thumbs_height(entry: ChatEntry) -> int:
    return THUMB_SIDE + THUMB_GAP if entry.images else 0


def colors_for(palette: QPalette) -> Colors:
    base = palette.color(QPalette.ColorRole.Base)
    text = palette.color(QPalette.ColorRole.Text)
    return Colors(
        code_background=blend(base, text, 0.06).name(),
        muted=blend(text, base, 0.45).name(),
        link=palette.color(QPalette.ColorRole.Link).name(),
        dark=base.lightness() < 128,
    )


class MessageDelegate(QStyledItemDelegate):
    copied = Signal(int)  # a code block's Copy link was clicked (its index in the message)
    version_step = Signal(int, int)  # row, -1 or +1: an arrow of the version switch was clicked
    action = Signal(int, str)  # row, one of message_buttons' actions: clicked on the label line
    text_menu = Signal(int, object, str)  # row, global position, selected text: a right-click

    def __init__(self, view: QAbstractItemView):
        super().__init__(view)
        self._view = view
        self.selectable = SelectableText(view)
        self.versions_enabled = True  # False while a reply streams: versions cannot change then
        self.can_reply = True  # False while no model is ready: no Regenerate or Continue
        self._layouts: dict[int, _RowLayout] = {}
        self._sizes_told: dict[int, QSize] = {}  # the size each row had when the view asked
        self.layouts_built = 0  # text layouts made (not served from the cache), for diagnostics
        self._thinking_shown: set[int] = set()  # rows whose <think> section is expanded

    def clear_cache(self) -> None:
        self._layouts.clear()
        self._sizes_told.clear()
        self._thinking_shown.clear()

    def row_changed(self, index: AnyIndex) -> None:
        """A row's content changed: have the view lay the rows out again only if its size did.

        A streaming reply changes 30 times a second but wraps onto a new line far less often.
        (Compared with the size the view was last given, not with the cache: the view may have
        asked for the new layout already, to repaint the row.)
        """
        row = index.row()
        new_size = self._layout(row, index.data(MessageRole), self._view.font()).size
        if self._sizes_told.get(row) != new_size:
            self._sizes_told[row] = new_size
            self.sizeHintChanged.emit(index)

    # -- geometry -------------------------------------------------------------------------------

    def _row_width(self) -> int:
        return max(200, self._view.viewport().width())

    def _max_text_width(self, role: str, row_width: int) -> int:
        fraction = USER_MAX_FRACTION if role == ROLE_USER else ASSISTANT_MAX_FRACTION
        return max(80, int((row_width - 2 * SIDE_MARGIN) * fraction) - 2 * PADDING_X)

    def _layout(self, row: int, entry: ChatEntry, font: QFont) -> _RowLayout:
        row_width = self._row_width()
        cached = self._layouts.get(row)
        show_thinking = row in self._thinking_shown
        colors = colors_for(self._view.palette())
        if (
            cached
            and cached.version == entry.version
            and cached.row_width == row_width
            and cached.show_thinking == show_thinking
            and cached.colors == colors  # a switch to dark mode recolours the code
        ):
            return cached
        self.layouts_built += 1
        doc = QTextDocument()
        doc.setDocumentMargin(0)
        doc.setIndentWidth(LIST_INDENT)
        doc.setDefaultFont(font)
        option = QTextOption()
        option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        doc.setDefaultTextOption(option)
        code_blocks: tuple[str, ...] = ()
        if entry.role == ROLE_USER or not entry.text:
            # what the person typed, as typed (an image sent alone has no text)
            doc.setPlainText(entry.text or ("" if entry.images else WAITING_TEXT))
        else:
            # Models write markdown. Raw HTML stays text: a reply must not restyle the app.
            rendered = render_markdown(entry.text, colors, show_thinking=show_thinking)
            doc.setHtml(rendered.html)
            code_blocks = rendered.code_blocks
        width = self._max_text_width(entry.role, row_width)
        doc.setTextWidth(width)
        # A short message gets a bubble that fits it rather than the widest one allowed.
        doc.setTextWidth(min(width, int(doc.idealWidth()) + 1))

        label_height = QFontMetrics(self._label_font(font)).height() + LABEL_GAP
        height = (
            ROW_SPACING
            + label_height
            + _thumbs_height(entry)
            + int(doc.size().height())
            + 2 * PADDING_Y
            + self._footer_height(entry, font, row_width)
        )
        layout = _RowLayout(
            entry.version,
            row_width,
            doc,
            QSize(row_width, height),
            code_blocks,
            show_thinking,
            colors,
            tuple(thumbnail(a) for a in entry.images),
        )
        self._layouts[row] = layout
        return layout

    def _label_font(self, font: QFont) -> QFont:
        small = QFont(font)
        small.setPointSizeF(max(7.0, font.pointSizeF() * 0.85))
        return small

    def _label(self, entry: ChatEntry) -> str:
        if entry.role == ROLE_USER:
            return "You"
        return entry.author or "Assistant"

    def _footer_height(self, entry: ChatEntry, font: QFont, row_width: int) -> int:
        if not entry.footer:
            return 0
        metrics = QFontMetrics(self._label_font(font))
        bounds = QRect(0, 0, row_width - 2 * SIDE_MARGIN, 10_000)
        flags = int(Qt.TextFlag.TextWordWrap)
        return FOOTER_GAP + metrics.boundingRect(bounds, flags, entry.footer).height()

    def sizeHint(self, option: QStyleOptionViewItem, index: AnyIndex) -> QSize:
        size = self._layout(index.row(), index.data(MessageRole), option.font).size
        told = self._sizes_told.get(index.row())
        # A new width means the view is laying every row out anyway (a resize): remember what
        # it gets. At the same width, only row_changed may update what the view was told.
        if told is None or told.width() != size.width():
            self._sizes_told[index.row()] = size
        return size

    def _bubble(self, rect: QRect, entry: ChatEntry, doc: QTextDocument, font: QFont) -> QRect:
        bubble_w = int(doc.size().width()) + 2 * PADDING_X
        bubble_h = int(doc.size().height()) + 2 * PADDING_Y
        is_user = entry.role == ROLE_USER
        left = rect.right() - SIDE_MARGIN - bubble_w if is_user else rect.left() + SIDE_MARGIN
        top = rect.top() + ROW_SPACING + QFontMetrics(self._label_font(font)).height() + LABEL_GAP
        return QRect(left, top + _thumbs_height(entry), bubble_w, bubble_h)

    def thumbnail_rects(self, index: AnyIndex, rect: QRect, font: QFont) -> list[QRect]:
        """Where the row's image thumbnails are drawn: in a line between the label and the
        bubble, on the bubble's side."""
        entry: ChatEntry = index.data(MessageRole)
        layout = self._layout(index.row(), entry, font)
        top = rect.top() + ROW_SPACING + QFontMetrics(self._label_font(font)).height() + LABEL_GAP
        sizes = [
            p.size() if not p.isNull() else QSize(THUMB_SIDE, THUMB_SIDE) for p in layout.thumbnails
        ]
        total = sum(s.width() for s in sizes) + THUMB_GAP * max(0, len(sizes) - 1)
        x = rect.right() - SIDE_MARGIN - total if entry.role == ROLE_USER else rect.left() + (
            SIDE_MARGIN)  # fmt: skip
        rects = []
        for size in sizes:
            rects.append(QRect(x, top + THUMB_SIDE - size.height(), size.width(), size.height()))
            x += size.width() + THUMB_GAP
        return rects

    def _label_rect(self, rect: QRect, font: QFont) -> QRect:
        height = QFontMetrics(self._label_font(font)).height()
        return QRect(
            rect.left() + SIDE_MARGIN,
            rect.top() + ROW_SPACING,
            rect.width() - 2 * SIDE_MARGIN,
            height,
        )

    def switch_for(self, rect: QRect, entry: ChatEntry, font: QFont) -> VersionSwitch | None:
        """The version switch of a row drawn in `rect`, or None (one version)."""
        metrics = QFontMetrics(self._label_font(font))
        return version_switch(
            self._label_rect(rect, font),
            metrics.horizontalAdvance(self._label(entry)),
            metrics,
            entry.branches,
            on_right=entry.role == ROLE_USER,
        )

    def buttons_for(self, index: AnyIndex, rect: QRect, font: QFont) -> MessageButtons:
        """The actions in sight on the row's label line (message_buttons.py)."""
        entry: ChatEntry = index.data(MessageRole)
        last = index.row() == index.model().rowCount() - 1
        actions = actions_for(
            entry, idle=self.versions_enabled, can_reply=self.can_reply, last=last
        )
        metrics = QFontMetrics(self._label_font(font))
        label_rect = self._label_rect(rect, font)
        on_right = entry.role == ROLE_USER
        width = metrics.horizontalAdvance(self._label(entry))
        taken = (label_rect.right() - width, label_rect.right()) if on_right else (
            label_rect.left(), label_rect.left() + width)  # fmt: skip
        switch = self.switch_for(rect, entry, font)
        if switch is not None:
            taken = (min(taken[0], switch.previous.left()), max(taken[1], switch.next.right()))
        return message_buttons(label_rect, metrics, actions, on_right=on_right, taken=taken)

    def text_rect(self, index: AnyIndex, rect: QRect, font: QFont) -> QRect:
        """Where the row's text is drawn (inside the bubble's padding)."""
        entry: ChatEntry = index.data(MessageRole)
        bubble = self._bubble(rect, entry, self._layout(index.row(), entry, font).document, font)
        return bubble.adjusted(PADDING_X, PADDING_Y, -PADDING_X, -PADDING_Y)

    def anchor_at(self, index: AnyIndex, rect: QRect, pos: QPoint, font: QFont) -> str:
        """The link under `pos` (view coordinates) in the row's text, or ""."""
        entry: ChatEntry = index.data(MessageRole)
        layout = self._layout(index.row(), entry, font)
        bubble = self._bubble(rect, entry, layout.document, font)
        inside = QPointF(pos - bubble.topLeft() - QPoint(PADDING_X, PADDING_Y))
        return layout.document.documentLayout().anchorAt(inside)

    def editorEvent(self, event, model, option: QStyleOptionViewItem, index: AnyIndex) -> bool:
        kind = event.type()
        if kind not in (QEvent.Type.MouseButtonRelease, QEvent.Type.MouseMove):
            return False
        pos = event.position().toPoint()
        entry: ChatEntry = index.data(MessageRole)
        switch = self.switch_for(option.rect, entry, option.font)
        step = switch.step_at(pos) if switch is not None and self.versions_enabled else 0
        href = self.anchor_at(index, option.rect, pos, option.font)
        action = self.buttons_for(index, option.rect, option.font).action_at(pos)
        viewport = self._view.viewport()
        if kind == QEvent.Type.MouseMove:
            clickable = bool(href) or step != 0 or action is not None
            shape = Qt.CursorShape.PointingHandCursor if clickable else Qt.CursorShape.ArrowCursor
            viewport.setCursor(shape)
            if self.text_rect(index, option.rect, option.font).contains(pos):
                self.offer_selection(index)
            return False
        if event.button() != Qt.MouseButton.LeftButton:
            return False
        if step:
            self.version_step.emit(index.row(), step)
            return True
        if action is not None:
            self.action.emit(index.row(), action)
            return True
        return self.activate(index, href) if href else False

    # -- selectable text ------------------------------------------------------------------------

    def offer_selection(self, index: AnyIndex) -> None:
        """Lay the selectable copy of the text over this row (finished messages only: a
        streaming reply changes under the selection)."""
        entry: ChatEntry = index.data(MessageRole)
        if entry is not None and entry.text and not entry.streaming:
            self.selectable.open_row(index.row())

    def createEditor(self, parent, option: QStyleOptionViewItem, index: AnyIndex):
        editor = MessageTextView(parent)
        editor.setFont(option.font)
        persistent = QPersistentModelIndex(index)

        def follow_link(url) -> None:
            if persistent.isValid() and self.activate(persistent, url.toString()):
                self.setEditorData(editor, persistent)  # a Thought section opened or closed

        editor.anchorClicked.connect(follow_link)
        editor.menu_requested.connect(
            lambda pos, text: (
                persistent.isValid() and self.text_menu.emit(persistent.row(), pos, text)
            )
        )
        return editor

    def setEditorData(self, editor, index: AnyIndex) -> None:
        if isinstance(editor, MessageTextView):
            entry: ChatEntry = index.data(MessageRole)
            editor.show_document(self._layout(index.row(), entry, self._view.font()).document)

    def setModelData(self, editor, model, index: AnyIndex) -> None:
        pass  # read-only: the text view never changes a message

    def updateEditorGeometry(self, editor, option: QStyleOptionViewItem, index: AnyIndex) -> None:
        editor.setGeometry(self.text_rect(index, option.rect, option.font))

    def activate(self, index: AnyIndex, href: str) -> bool:
        """Do what one of the transcript's own links says; other links are never followed."""
        row = index.row()
        layout = self._layouts.get(row)
        if href.startswith(COPY_SCHEME) and layout is not None:
            block = int(href[len(COPY_SCHEME) :])
            if 0 <= block < len(layout.code_blocks):
                QGuiApplication.clipboard().setText(layout.code_blocks[block])
                self.copied.emit(block)
                return True
        if href == THINK_HREF:
            self._thinking_shown ^= {row}
            self.row_changed(index)
            self._view.viewport().update()
            return True
        return False

    # -- painting -------------------------------------------------------------------------------

    def _paint_thumbnails(self, painter, index: AnyIndex, rect: QRect, font, muted) -> None:
        layout = self._layouts.get(index.row())
        if layout is None or not layout.thumbnails:
            return
        for pixmap, where in zip(
            layout.thumbnails, self.thumbnail_rects(index, rect, font), strict=True
        ):
            if pixmap.isNull():  # refused or undecodable: a frame saying so
                painter.setPen(muted)
                painter.setBrush(Qt.BrushStyle.NoBrush)
                painter.drawRoundedRect(QRectF(where).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
                painter.drawText(where, int(Qt.AlignmentFlag.AlignCenter), "image\nrefused")
            else:
                painter.drawPixmap(where, pixmap)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: AnyIndex) -> None:
        entry: ChatEntry = index.data(MessageRole)
        doc = self._layout(index.row(), entry, option.font).document
        palette: QPalette = option.palette
        is_user = entry.role == ROLE_USER
        rect: QRect = option.rect
        label_font = self._label_font(option.font)

        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)

        bubble = self._bubble(rect, entry, doc, option.font)

        muted = blend(
            palette.color(QPalette.ColorRole.Text), palette.color(QPalette.ColorRole.Base), 0.45
        )
        painter.setFont(label_font)
        painter.setPen(muted)
        label_rect = self._label_rect(rect, option.font)
        align = Qt.AlignmentFlag.AlignRight if is_user else Qt.AlignmentFlag.AlignLeft
        # No clipping: at small sizes the underscore of a name like "Q4_K_M" sits below the descent.
        flags = align | Qt.AlignmentFlag.AlignVCenter | Qt.TextFlag.TextDontClip
        painter.drawText(label_rect, flags, self._label(entry))
        switch = self.switch_for(rect, entry, option.font)
        if switch is not None:
            text_colour = palette.color(QPalette.ColorRole.Text)
            paint_version_switch(painter, switch, text_colour, muted, enabled=self.versions_enabled)
        link = palette.color(QPalette.ColorRole.Link)
        paint_message_buttons(painter, self.buttons_for(index, rect, option.font), link)

        base = palette.color(QPalette.ColorRole.Base)
        if is_user:
            fill = blend(base, palette.color(QPalette.ColorRole.Highlight), 0.22)
        elif entry.failed:
            fill = blend(base, QColor(220, 60, 60), 0.15)
        else:
            fill = blend(base, palette.color(QPalette.ColorRole.Text), 0.07)
        self._paint_thumbnails(painter, index, rect, option.font, muted)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(fill)
        painter.drawRoundedRect(QRectF(bubble), RADIUS, RADIUS)
        if option.state & QStyle.StateFlag.State_Selected:
            painter.setPen(palette.color(QPalette.ColorRole.Highlight))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(QRectF(bubble).adjusted(0.5, 0.5, -0.5, -0.5), RADIUS, RADIUS)

        painter.translate(bubble.left() + PADDING_X, bubble.top() + PADDING_Y)
        context = QAbstractTextDocumentLayout.PaintContext()
        text_palette = QPalette(palette)
        if not entry.text:
            text_palette.setColor(QPalette.ColorRole.Text, muted)
        context.palette = text_palette
        if not self.selectable.is_open(index):  # else the selectable copy over it draws the text
            doc.documentLayout().draw(painter, context)
        painter.translate(-(bubble.left() + PADDING_X), -(bubble.top() + PADDING_Y))

        if entry.footer:
            painter.setFont(label_font)
            painter.setPen(QColor(200, 60, 60) if entry.failed else muted)
            footer_rect = QRect(
                rect.left() + SIDE_MARGIN,
                bubble.bottom() + 1 + FOOTER_GAP,
                rect.width() - 2 * SIDE_MARGIN,
                rect.bottom() - bubble.bottom(),
            )
            flags = int(align | Qt.AlignmentFlag.AlignTop | Qt.TextFlag.TextWordWrap)
            painter.drawText(footer_rect, flags, entry.footer)
        painter.restore()
