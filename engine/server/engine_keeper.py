"""Keeping `hearth serve`'s engine alive: when the worker dies (a crash, `kill -9`, or the link
ending one stuck inside a C call), it is started again and the same model loaded, on a thread
of its own, while requests get 503 with Retry-After. A worker that keeps dying (3 times in
5 minutes) or a model that no longer loads ends the server with a message and exit status 1,
rather than a server that answers 503 for ever.

The window has no keeper: it owns its worker and offers the reload itself.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EventQueue

MAX_RESTARTS = 3
RESTART_WINDOW_S = 300.0
START_TIMEOUT_S = 120.0


class EngineKeeper:
    def __init__(
        self,
        client: EngineClient,
        params: p.ModelParams,
        *,
        say: Callable[[str], None],
        give_up: Callable[[str], None],
        load_timeout_s: float = 600.0,
    ):
        self.client = client
        self.params = params
        self._say = say  # a line for the console
        self._give_up = give_up  # end the server with this message
        self._load_timeout_s = load_timeout_s
        self._restarts: collections.deque[float] = collections.deque()
        self._lock = threading.Lock()
        self.restarting = False

    def restart(self, reason: str) -> None:
        """Start the worker again and reload the model (returns at once)."""
        with self._lock:
            if self.restarting:
                return
            now = time.monotonic()
            while self._restarts and now - self._restarts[0] > RESTART_WINDOW_S:
                self._restarts.popleft()
            if len(self._restarts) >= MAX_RESTARTS:
                self._give_up(
                    f"The engine stopped {MAX_RESTARTS + 1} times within "
                    f"{RESTART_WINDOW_S / 60:.0f} minutes (last: {reason}); the server ends. "
                    "Look at the lines above, then start it again, perhaps with a shorter "
                    "--ctx or fewer --parallel requests."
                )
                return
            self._restarts.append(now)
            self.restarting = True
        self._say(f"[{reason} Restarting the engine and loading the model again.]")
        threading.Thread(target=self._restart, name="engine-restart", daemon=True).start()

    def _restart(self) -> None:
        events = EventQueue()
        self.client.add_listener(events)
        try:
            self.client.kill()  # what is left of the old one, if anything
            self.client.start()
            ready = events.wait_for(p.Ready, timeout=START_TIMEOUT_S)
            if not isinstance(ready, p.Ready):
                raise RuntimeError("the engine did not start")
            self.client.load(self.params)
            loaded = events.wait_for(p.ModelLoaded, p.LoadFailed, timeout=self._load_timeout_s)
            if not isinstance(loaded, p.ModelLoaded):
                raise RuntimeError(getattr(loaded, "message", "the engine stopped while loading"))
        except (RuntimeError, TimeoutError, OSError) as exc:
            self._give_up(f"The engine could not be started again ({exc}); the server ends.")
            return
        finally:
            self.client.remove_listener(events)
            with self._lock:
                self.restarting = False
        self._say("[The engine is back; requests are answered again.]")
