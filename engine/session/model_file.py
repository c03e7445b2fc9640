"""Check a file the user offers as a model before the engine ever sees it.

The header is read here, in the calling process (the window or the CLI), by the bounded GGUF
header reader, once per open: the load policy plans from the ModelInfo it returns. A file that is
not a readable GGUF, or one llama.cpp would abort on (engine.gguf.load_check), is refused with a
message, and the model already loaded stays loaded.
"""

from __future__ import annotations

from pathlib import Path

from engine.gguf import GGUFError, ModelInfo, read_model_info
from engine.gguf.load_check import load_problem
from engine.gguf.projector import is_projector


class UnusableModelFile(Exception):
    """A file that cannot be opened as a model; str() is the message to show the user."""


def check_model_file(path: str | Path) -> ModelInfo:
    """The file's ModelInfo, or UnusableModelFile saying what is wrong."""
    path = Path(path)
    name = path.name or str(path)
    if path.suffix.lower() != ".gguf":
        raise UnusableModelFile(
            f"“{name}” is not a GGUF model file. Hearth opens quantized models in the GGUF "
            "format (files ending in .gguf)."
        )
    if not path.exists():
        raise UnusableModelFile(f"“{name}” does not exist (was it moved or deleted?).")
    if not path.is_file():
        raise UnusableModelFile(f"“{name}” is a folder, not a GGUF model file.")
    try:
        info = read_model_info(path)
    except GGUFError as exc:
        raise UnusableModelFile(
            f"“{name}” is not a readable GGUF file: {problem_text(exc)}"
        ) from exc
    except OSError as exc:
        raise UnusableModelFile(f"“{name}” could not be read: {exc.strerror or exc}") from exc
    except Exception as exc:
        # A reader bug on a hostile file must not take the GUI down; report it like a bad file.
        raise UnusableModelFile(
            f"“{name}” could not be read as a GGUF file ({type(exc).__name__}: {exc})."
        ) from exc
    if is_projector(info):
        raise UnusableModelFile(
            f"“{name}” is a vision projector (mmproj), not a model: it lets a vision model see "
            "images. Put it in the folder of the model it belongs to and open that model; "
            "Hearth loads the projector with it."
        )
    # Refused here, not by an abort of the engine: types llama.cpp would crash on, no vocabulary.
    problem = load_problem(info, for_chat=True)
    if problem:
        raise UnusableModelFile(f"“{name}” cannot be loaded: {problem}")
    return info


def problem_text(exc: GGUFError) -> str:
    """What is wrong with the file and what to do, as sentences (the field and byte offset are
    for a bug report, so they come last)."""
    if exc.field == "magic":
        return (
            f"{exc.detail}. It may be another kind of file with a .gguf name, or a download that "
            "went wrong; choose a GGUF model file or download it again."
        )
    return f"{exc.headline} ({exc.field}, byte {exc.offset:,}: {exc.detail}). {exc.advice}"
