"""The engine worker process: `python -m engine.runtime.worker`.

Commands arrive on stdin, events leave on the original stdout (see protocol.py). Anything else
written to stdout by C code is sent to stderr instead, where the client keeps the last lines for
crash reports.

Three threads:
- the main thread runs commands one at a time (load, generate, unload, ...); with several
  sequences loaded (n_parallel > 1) a Generate only joins the batch, and the thread runs
  decode steps of all running generations between commands;
- a reader thread takes frames off stdin; Stop and GetStatus act at once even mid-generation;
- a writer thread sends events, so the decode loop never waits on the pipe or the GUI. When the
  GUI falls behind, queued text of one request is merged into one event.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
import traceback
from typing import Any, BinaryIO

from engine.runtime import hearth_prewarm
from engine.runtime import protocol as p


class EventWriter:
    def __init__(self, stream: BinaryIO):
        self._stream = stream
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="event-writer", daemon=True)
        self._thread.start()

    def send(self, event: Any) -> None:
        self._queue.put(event)

    def flush(self, timeout: float = 5.0) -> None:
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def _run(self) -> None:
        pending: p.TokenText | None = None
        while True:
            item = self._queue.get()
            batch = [item]
            while not self._queue.empty():  # merge what piled up while we were writing
                batch.append(self._queue.get())
            frames = []
            for event in batch:
                if isinstance(event, threading.Event):
                    if pending:
                        frames.append(p.encode(pending))
                        pending = None
                    self._write(frames)
                    frames = []
                    event.set()
                    continue
                if isinstance(event, p.TokenText):
                    if pending and pending.request_id == event.request_id:
                        pending = p.TokenText(
                            request_id=event.request_id,
                            text=pending.text + event.text,
                            n_tokens=pending.n_tokens + event.n_tokens,
                        )
                        continue
                    if pending:
                        frames.append(p.encode(pending))
                    pending = event
                    continue
                if pending:
                    frames.append(p.encode(pending))
                    pending = None
                frames.append(p.encode(event))
            if pending:
                frames.append(p.encode(pending))
                pending = None
            self._write(frames)

    def _write(self, frames: list[bytes]) -> None:
        if not frames:
            return
        try:
            self._stream.write(b"".join(frames))
            self._stream.flush()
        except (BrokenPipeError, OSError):
            os._exit(0)  # the GUI is gone; nobody is left to talk to


class FaultInjection:
    """Test hooks, set through HEARTH_WORKER_FAULT (e.g. "abort_after_tokens=5",
    "no_header_check" to hand llama.cpp a file it aborts on, or "exit_before_ready", to test
    crash reports)."""

    def __init__(self, spec: str):
        self.abort_after_tokens: int | None = None
        self.header_check = True
        self.exit_before_ready = False
        for part in filter(None, (s.strip() for s in spec.split(","))):
            name, _, value = part.partition("=")
            if name == "abort_after_tokens":
                self.abort_after_tokens = int(value)
            elif name == "no_header_check":
                self.header_check = False
            elif name == "exit_before_ready":
                self.exit_before_ready = True


def main() -> int:
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # printf from C code must not corrupt the protocol stream
    sys.stdout = sys.stderr
    writer = EventWriter(protocol_out)

    from engine.runtime.engine_state import WorkerEngine  # imports llama.cpp: after the redirect

    faults = FaultInjection(os.environ.get("HEARTH_WORKER_FAULT", ""))
    if faults.exit_before_ready:
        print("error: exiting before ready (HEARTH_WORKER_FAULT)", file=sys.stderr)
        return 3
    engine = WorkerEngine(writer.send, flush=writer.flush, faults=faults)
    engine.announce_ready()
    # The Hearth engine's imports while the person picks a model (hearth_prewarm.py says when);
    # after Ready has gone out: loading torch's libraries holds the GIL for long stretches,
    # which would hold the event writer back
    writer.flush()
    hearth_prewarm.start(log=lambda line: print(line, file=sys.stderr, flush=True))

    commands: queue.Queue = queue.Queue()

    def read_commands() -> None:
        stdin = sys.stdin.buffer
        while True:
            try:
                msg = p.read_frame(stdin)
            except p.ProtocolError as exc:
                print(f"hearth worker: bad command frame: {exc}", file=sys.stderr)
                msg = None
            if msg is None:  # the GUI closed our stdin (or died): shut down
                engine.request_stop()
                commands.put(p.Shutdown())
                return
            if isinstance(msg, p.Stop):
                engine.request_stop(msg.request_id)
            elif isinstance(msg, p.GetStatus):
                writer.send(engine.status())
            else:
                commands.put(msg)

    threading.Thread(target=read_commands, name="command-reader", daemon=True).start()

    while True:
        if engine.busy:  # batched generations run: a step between commands, never a wait
            try:
                command = commands.get_nowait()
            except queue.Empty:
                engine.step()
                continue
        else:
            command = commands.get()
        if isinstance(command, p.Shutdown):
            engine.unload(quiet=True)
            writer.flush(2.0)
            # Exit at once: the reader thread is blocked on stdin, and interpreter shutdown
            # would wait on it.
            os._exit(0)
        try:
            engine.handle(command, received_at=time.perf_counter())
        except Exception as exc:  # a bug must not take the loaded model down with it
            traceback.print_exc()
            writer.send(engine.failure_event(command, f"Internal error in the engine: {exc!r}"))


if __name__ == "__main__":
    sys.exit(main())
