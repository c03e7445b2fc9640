"""`python -m engine.llama.probe`: print the installed engine's view as one JSON line.

Run in a short-lived child process by `probe_engine_devices`; llama.cpp's own log lines go to
stderr, the answer is the last line of stdout. Exit status 0 with an answer, 1 with an answer
whose `error` says what went wrong (llama_cpp not importable, a symbol missing).
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    try:
        from engine.llama.devices import describe_engine

        view = describe_engine()
    except ImportError as exc:
        print(json.dumps({"error": f"The engine (llama_cpp) is not installed: {exc}"}))
        return 1
    except (OSError, AttributeError) as exc:
        print(json.dumps({"error": f"The installed engine could not be asked: {exc}"}))
        return 1
    print(json.dumps(view.to_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
