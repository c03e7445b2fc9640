"""The one exception the GGUF reader raises.

Every failure, from a bad magic number to a network error halfway through a remote header,
reaches the caller as a `GGUFError` that names the field being read and the byte offset of
that field in the file, so that a person (or a bug report) can find the exact spot.
"""

from __future__ import annotations


class GGUFError(Exception):
    """A GGUF header could not be read: the file is malformed, truncated, or unreachable.

    `field` names what was being read (for example ``"tensor 'blk.0.attn_q.weight' ggml type"``),
    `offset` is the byte offset of that field from the start of the file, and `detail` says what
    was wrong with it.
    """

    def __init__(self, field: str, offset: int, detail: str) -> None:
        self.field = field
        self.offset = offset
        self.detail = detail
        super().__init__(f"{field} at byte {offset}: {detail}")

    def user_message(self, source: str | None = None) -> str:
        """A sentence for the CLI and the GUI: what is wrong, where, and what to do about it."""
        where = f"{source}: " if source else ""
        return f"{where}{self.headline}: {self}. {self.advice}"

    @property
    def headline(self) -> str:
        return "not a usable GGUF model"

    @property
    def advice(self) -> str:
        return "The file is damaged or not a GGUF model; download it again or pick another file."


class GGUFSourceError(GGUFError):
    """The bytes could not be fetched at all (missing file, permission, network, HTTP status)."""

    @property
    def headline(self) -> str:
        return "cannot read the file"

    @property
    def advice(self) -> str:
        return "Check the path or the network connection, then try again."


class GGUFDeadlineError(GGUFError):
    """Reading the header took longer than the caller allowed."""

    @property
    def headline(self) -> str:
        return "gave up reading the header"

    @property
    def advice(self) -> str:
        return "The header is unusually slow to read; try again, or allow more time."


class GGUFInternalError(GGUFError):
    """A defect in the reader itself; raised instead of letting another exception type escape."""

    @property
    def advice(self) -> str:
        return "This is a bug in Hearth's GGUF reader; please report it with the file."
