"""Concurrent streaming clients against `hearth serve` and llama.cpp's `llama-server`.

    python -m benchmarks.server_concurrency MODEL.gguf [--llama-server PATH] [--clients 1 4 16]
        [--hearth-engines llama hearth]

Each server is started on 127.0.0.1 with as many parallel slots as the largest client count and
the same context per slot: `hearth serve` once per engine in --hearth-engines (llama: llama.cpp's
batching, the default; hearth: the Hearth engine's continuous batching on its own kernels), and
llama.cpp's llama-server when given. Then, for each client count, that many clients stream a
completion of exactly --max-tokens tokens at once (`ignore_eos`, greedy unless --temperature)
after prompts of about --prompt-words words, each prompt different from the others (no shared
prefix to reuse). Per
client count it reports:

- aggregate tok/s: all generated tokens over the wall time from the first request sent to the
  last token received;
- decode tok/s: the tokens after each request's first, over the time from the earliest first
  token of the round to its last token (prefill and time to first token left out);
- time to first token, p50 and p95 over all requests of all rounds.

With --shared-prefix-words N every prompt of a round starts with the same "system prompt" of N
words (about N tokens; a different one each round, so each round computes it afresh), then its
own part. Each level then also prints the prompt tokens requested and the prompt tokens the
server computed (requested minus those it reports cached: `usage.prompt_tokens_details.
cached_tokens` from `hearth serve`, `timings.cache_n` from llama-server), so "a shared
2,000-token system prompt with 16 clients: prefill work counted once" reads as computed ~=
rounds x (N + 16 x the own part) against requested rounds x 16 x (N + the own part).

A round that has not ended after --level-timeout seconds counts its unfinished requests as
failed, so one stuck server cannot hold the run past its budget.

The clients speak raw HTTP/1.1 on asyncio (one connection per request, no client library), so
the client side costs the same for both servers. Results go to stdout and, with --json, to a
file. Run it on the machine whose numbers you want; it says which servers it measured.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

START_TIMEOUT_S = 600
WORDS = "river stone lantern meadow copper violet harbour thistle ember orchard quartz falcon"


@dataclass(frozen=True)
class RequestResult:
    ttft_s: float
    tokens: int
    ended_s: float  # since the round started
    first_s: float = 0.0  # its first text, since the round started
    prompt_tokens: int = 0  # as the server reported them (0: not reported)
    cached_tokens: int = 0  # of those, taken from the server's cache, not computed


@dataclass(frozen=True)
class LevelResult:
    server: str
    clients: int
    rounds: int
    aggregate_tok_s: float
    ttft_p50_s: float
    ttft_p95_s: float
    tokens: int
    failures: int
    decode_tok_s: float = 0.0
    prompt_tokens: int = 0  # all requests' prompt tokens, as the server reported them
    prompt_tokens_computed: int = 0  # of those, the ones the server computed


def decode_rate(rounds: list[list[RequestResult]]) -> float:
    """Tokens after each request's first, over the time from the round's earliest first token
    to its last token, summed over rounds."""
    tokens = sum(r.tokens - 1 for results in rounds for r in results)
    seconds = sum(
        max(r.ended_s for r in results) - min(r.first_s for r in results)
        for results in rounds
        if results
    )
    return tokens / seconds if seconds > 0 else 0.0


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), linear between the two nearest ranks."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def prompt_for(client: int, words: int, run: int = 0, shared_words: int = 0) -> str:
    """A prompt that differs from every other one (other clients, other rounds, the warm-up)
    from its first token on, so no server can answer any of it from its prompt cache; with
    shared_words, after a system prompt of that many words that every client of the round
    shares (and no other round)."""
    vocabulary = WORDS.split()
    body = " ".join(vocabulary[(client * 7 + i) % len(vocabulary)] for i in range(words))
    own = f"{run * 1000 + client} {body}. Continue the story:"
    if not shared_words:
        return own
    shared = " ".join(vocabulary[(i * 5 + i // 12) % len(vocabulary)] for i in range(shared_words))
    return f"System prompt {run}: {shared}.\n\n{own}"


def sse_payloads(buffer: bytes) -> tuple[list[dict], bytes]:
    """Complete `data:` events of a server-sent-event stream, and what is left over."""
    events = []
    while b"\n\n" in buffer:
        block, buffer = buffer.split(b"\n\n", 1)
        for line in block.split(b"\n"):
            line = line.strip()
            if line.startswith(b"data:"):
                data = line[5:].strip()
                if data and data != b"[DONE]":
                    events.append(json.loads(data))
    return events, buffer


async def stream_one(port: int, body: dict, started: float, on_first=None) -> RequestResult:
    """One streamed completion; `on_first()` is called when its first text arrives."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    payload = json.dumps(body).encode()
    writer.write(
        b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload)
    )
    await writer.drain()
    sent = time.perf_counter()
    status = await reader.readline()
    if b" 200 " not in status:
        raise RuntimeError(f"server answered {status!r}: {(await reader.read(500))!r}")
    chunked = False
    while header := (await reader.readline()).strip():
        name, _, value = header.partition(b":")
        if name.strip().lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    first: float | None = None
    usage_tokens = None
    prompt_tokens = cached_tokens = 0
    buffer = b""
    async for data in _body_pieces(reader, chunked):
        events, buffer = sse_payloads(buffer + data.replace(b"\r\n", b"\n"))
        for event in events:
            if first is None and any(c.get("text") for c in event.get("choices") or []):
                first = time.perf_counter()
                if on_first is not None:
                    on_first()
            if event.get("usage"):
                usage = event["usage"]
                usage_tokens = usage.get("completion_tokens")
                prompt_tokens = usage.get("prompt_tokens") or prompt_tokens
                details = usage.get("prompt_tokens_details") or {}
                cached_tokens = details.get("cached_tokens") or cached_tokens
            if (event.get("timings") or {}).get("cache_n"):  # llama-server's own field
                cached_tokens = event["timings"]["cache_n"]
    writer.close()
    if first is None:
        raise RuntimeError("the stream ended without text")
    tokens = usage_tokens if usage_tokens is not None else body["max_tokens"]
    return RequestResult(
        ttft_s=first - sent, tokens=tokens, ended_s=time.perf_counter() - started,
        first_s=first - started, prompt_tokens=prompt_tokens, cached_tokens=cached_tokens,
    )  # fmt: skip


async def _body_pieces(reader: asyncio.StreamReader, chunked: bool):
    """The response body as it arrives, chunked transfer encoding undone."""
    if not chunked:
        while data := await reader.read(65536):
            yield data
        return
    while True:
        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            return
        yield await reader.readexactly(size)
        await reader.readline()  # the CRLF after each chunk


async def run_level(
    port: int, clients: int, args, run: int
) -> tuple[list[RequestResult], int, float]:
    started = time.perf_counter()
    bodies = [
        {
            "prompt": prompt_for(i, args.prompt_words, run, args.shared_prefix_words),
            "max_tokens": args.max_tokens,
            "temperature": args.temperature,
            "stream": True,
            "ignore_eos": True,
            "stream_options": {"include_usage": True},
        }
        for i in range(clients)
    ]
    tasks = [asyncio.ensure_future(stream_one(port, body, started)) for body in bodies]
    await asyncio.wait(tasks, timeout=args.level_timeout)
    outcomes = []
    for task in tasks:
        if not task.done():
            task.cancel()
            outcomes.append(TimeoutError(f"no end after {args.level_timeout:g} s"))
        else:
            outcomes.append(task.exception() or task.result())
    results = [o for o in outcomes if isinstance(o, RequestResult)]
    failures = [o for o in outcomes if not isinstance(o, RequestResult)]
    for failure in failures[:3]:
        print(f"  a request failed: {failure}", file=sys.stderr)
    wall = max((r.ended_s for r in results), default=time.perf_counter() - started)
    return results, len(failures), wall


def measure(server: str, port: int, args) -> list[LevelResult]:
    asyncio.run(run_level(port, 1, args, run=0))  # warm-up: first-use costs stay out
    levels = []
    runs = itertools.count(1)
    for clients in args.clients:
        ttfts, tokens, wall_total, failures, rounds = [], 0, 0.0, 0, []
        prompt_tokens = computed = 0
        for _ in range(args.rounds):
            results, failed, wall = asyncio.run(run_level(port, clients, args, next(runs)))
            rounds.append(results)
            ttfts += [r.ttft_s for r in results]
            tokens += sum(r.tokens for r in results)
            prompt_tokens += sum(r.prompt_tokens for r in results)
            computed += sum(r.prompt_tokens - r.cached_tokens for r in results)
            wall_total += wall
            failures += failed
        level = LevelResult(
            server=server,
            clients=clients,
            rounds=args.rounds,
            aggregate_tok_s=tokens / wall_total if wall_total else 0.0,
            ttft_p50_s=percentile(ttfts, 50),
            ttft_p95_s=percentile(ttfts, 95),
            tokens=tokens,
            failures=failures,
            decode_tok_s=decode_rate(rounds),
            prompt_tokens=prompt_tokens,
            prompt_tokens_computed=computed,
        )
        print(
            f"{server:16s} clients={clients:3d} aggregate {level.aggregate_tok_s:8.1f} tok/s  "
            f"decode {level.decode_tok_s:8.1f} tok/s  "
            f"TTFT p50 {level.ttft_p50_s * 1000:7.1f} ms  p95 {level.ttft_p95_s * 1000:7.1f} ms"
            + (f"  ({failures} failed)" if failures else "")
            + (
                f"\n{'':16s} prompt tokens: {prompt_tokens} requested, {computed} computed"
                if args.shared_prefix_words
                else ""
            ),
            flush=True,
        )
        levels.append(level)
    return levels


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


HEARTH_SERVERS = {"llama": "hearth-llama.cpp", "hearth": "hearth-engine", "auto": "hearth-auto"}


def hearth_command(args, port: int, slots: int, engine: str = "llama") -> list[str]:
    return [
        sys.executable, "-c", "import sys; from engine.cli import main; sys.exit(main())",
        "serve", args.model, "--port", str(port), "--parallel", str(slots),
        "--ctx", str(args.ctx), "--queue", "64", "--engine", engine,
        *(["--gpu-layers", str(args.gpu_layers)] if args.gpu_layers >= 0 else []),
        *(["--threads", str(args.threads)] if args.threads else []),
    ]  # fmt: skip


def llama_server_command(args, port: int, slots: int) -> list[str]:
    return [
        args.llama_server, "-m", args.model, "--host", "127.0.0.1", "--port", str(port),
        "--parallel", str(slots), "-c", str(args.ctx * slots), "-ngl", str(args.gpu_layers),
        "--kv-unified", "--no-webui", *(["-t", str(args.threads)] if args.threads else []),
    ]  # fmt: skip


def started_server(command: list[str], port: int, log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    started = time.monotonic()
    deadline = started + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{command[0]} exited ({proc.returncode}); see {log}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                if b" 200 " in sock.recv(200):
                    print(
                        f"{log.stem}: answering after "
                        f"{time.monotonic() - started:.1f} s (load and warm-up)",
                        flush=True,
                    )
                    return proc
        except OSError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"{command[0]} did not answer within {START_TIMEOUT_S} s; see {log}")


def run_server(name: str, command_for, args) -> list[LevelResult]:
    port = free_port()
    slots = max(args.clients)
    log = Path(args.logs) / f"{name}.log"
    proc = started_server(command_for(args, port, slots), port, log)
    try:
        return measure(name, port, args)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="GGUF file")
    parser.add_argument("--llama-server", help="path of llama.cpp's llama-server, to compare")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--prompt-words", type=int, default=64)
    parser.add_argument(
        "--shared-prefix-words",
        type=int,
        default=0,
        help="a system prompt of this many words (about as many tokens) shared by every "
        "prompt of a round; prints the prompt tokens computed",
    )
    parser.add_argument("--ctx", type=int, default=1024, help="context tokens per slot")
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="the requests' temperature (0: greedy; above, each server's other sampling "
        "defaults apply)",
    )
    parser.add_argument("--gpu-layers", type=int, default=-1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: the servers')")
    parser.add_argument("--logs", default=os.environ.get("TMPDIR", "/tmp"))
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument(
        "--hearth-engines",
        nargs="+",
        choices=list(HEARTH_SERVERS),
        default=["llama"],
        help="`hearth serve --engine` values to run, in order",
    )
    parser.add_argument(
        "--level-timeout",
        type=float,
        default=300.0,
        help="seconds a round may take before its open requests count as failed",
    )
    args = parser.parse_args(argv)
    results = []
    if args.llama_server:  # first: the reference row stands even if a later server runs out of time
        results += run_server("llama-server", llama_server_command, args)
    for engine in args.hearth_engines:
        command = functools.partial(hearth_command, engine=engine)
        try:
            results += run_server(HEARTH_SERVERS[engine], command, args)
        except Exception as exc:  # one server that cannot start leaves the others' rows standing
            print(f"{HEARTH_SERVERS[engine]}: no figures: {exc}", flush=True)
    if args.llama_server:
        for clients, engine in itertools.product(args.clients, args.hearth_engines):
            print(comparison(results, HEARTH_SERVERS[engine], clients))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 0


def comparison(results: list[LevelResult], ours_name: str, clients: int) -> str:
    """One line: a `hearth serve` row against llama-server's at the same client count."""
    ours, theirs = (
        next((r for r in results if r.server == s and r.clients == clients), None)
        for s in (ours_name, "llama-server")
    )
    if ours is None or theirs is None:
        return f"clients={clients:3d} {ours_name} / llama-server: a row is missing (see above)"

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.3f}" if b else "n/a"

    return (
        f"clients={clients:3d} {ours_name} / llama-server: throughput "
        f"{ratio(ours.aggregate_tok_s, theirs.aggregate_tok_s)}, decode "
        f"{ratio(ours.decode_tok_s, theirs.decode_tok_s)}, TTFT p95 "
        f"{ratio(ours.ttft_p95_s, theirs.ttft_p95_s)} (below 1: sooner)"
    )


if __name__ == "__main__":
    sys.exit(main())
