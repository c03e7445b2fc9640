"""Writing small state files so that a crash, a full disk or a power cut never leaves half a file.

One writer for every JSON file Hearth keeps (settings, remembered load settings, the download
queue): write beside, flush to disk, then rename over the old file in one step.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path


def write_json_atomic(path: str | Path, data: object) -> None:
    """Replace `path` with `data` as JSON: the old file stays whole until the new one is."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A name of its own per thread: two threads saving the same file at once (a download
    # finishing while the window records another) must not write into one temporary file.
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
