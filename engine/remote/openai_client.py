"""Talking to an OpenAI-compatible server: the models it offers (/v1/models) and one streamed
chat reply (/v1/chat/completions with `stream: true`).

The reply streams as text pieces, then one RemoteDone with what the server said about it: the
token counts where it gives `usage` (asked for with `stream_options.include_usage`; llama-server
and Hearth also send `timings`), and the time to the first text as measured here. A stop flag is
checked between pieces; setting it closes the connection, which ends the server's decode too.
Every failure is a RemoteError that says what happened and what to do.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2 as httpx

from engine.enums import StopReason
from engine.runtime import protocol as p

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 300.0  # between two pieces of a reply: a big prompt's prefill on a slow host
MAX_MODELS = 1000
_FINISH_REASONS = {"stop": StopReason.EOS, "length": StopReason.MAX_TOKENS}


class RemoteError(RuntimeError):
    """The server could not be reached, refused the request, or answered in a way not
    understood; the message says which and what to do."""


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # ends with /v1 (or the server's own prefix)
    api_key: str = ""

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).netloc


@dataclass(frozen=True)
class RemoteDone:
    stop_reason: str
    stats: p.GenerationStats
    counted: bool  # the server said how many tokens (else the counts are 0)


def normalized_base_url(text: str) -> str:
    """The API's base address from what a person types: `host:port`, `http://host:port`,
    `.../v1` or `.../v1/`; RemoteError when it cannot be an http(s) address."""
    text = text.strip()
    if not text:
        raise RemoteError("Type the server's address, for example http://192.168.1.20:8080.")
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RemoteError(f"“{text}” is not an http:// or https:// address.")
    path = parts.path.rstrip("/")
    if not path:
        path = "/v1"  # the servers named here all answer the OpenAI API under /v1
    for tail in ("/chat/completions", "/models"):
        path = path.removesuffix(tail)
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def list_models(endpoint: Endpoint, *, timeout_s: float = CONNECT_TIMEOUT_S) -> list[str]:
    """The ids of the models the server offers, in its order."""
    with _client(endpoint, timeout_s) as client:
        response = _send(client, "GET", "/models", endpoint)
        body = _json(response, endpoint)
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise RemoteError(
            f"{endpoint.host} answered /models without a model list. Is it an OpenAI-compatible "
            "server, and is the address its API's (ending in /v1)?"
        )
    ids = [
        m["id"] for m in data[:MAX_MODELS] if isinstance(m, dict) and isinstance(m.get("id"), str)
    ]
    if not ids:
        raise RemoteError(f"{endpoint.host} offers no models. Load one on that server first.")
    return ids


def openai_messages(messages: Sequence[p.ChatMessage]) -> list[dict[str, Any]]:
    """The conversation in the API's shape: an assistant's calls as `tool_calls`, a tool's
    result with the id of the call it answers."""
    shaped = []
    for m in messages:
        item: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls_json:
            item["tool_calls"] = json.loads(m.tool_calls_json)
        if m.role == "tool":
            item["tool_call_id"] = m.tool_call_id
            if m.name:
                item["name"] = m.name
        shaped.append(item)
    return shaped


def chat_body(
    model: str,
    messages: Sequence[p.ChatMessage],
    sampling: p.SamplingParams,
    max_tokens: int,
    tools: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": openai_messages(messages),
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
    }
    if sampling.seed != 0xFFFFFFFF:
        body["seed"] = sampling.seed
    if tools:
        body["tools"] = tools
    return body


def stream_chat(
    endpoint: Endpoint,
    body: dict[str, Any],
    stop: threading.Event,
) -> Iterator[str | RemoteDone]:
    """The reply's text as it comes (a tool call the server returns in OpenAI's `tool_calls`
    comes as `<tool_call>` text, the form the window reads), then one RemoteDone."""
    started = time.monotonic()
    first_at: float | None = None
    usage: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    finish = ""
    calls: dict[int, dict[str, str]] = {}
    with _client(endpoint, CONNECT_TIMEOUT_S) as client:
        request = client.build_request("POST", _url(endpoint, "/chat/completions"), json=body)
        try:
            response = client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _unreachable(endpoint, exc) from None
        try:
            if response.status_code >= 400:
                response.read()
                raise _refused(endpoint, response)
            for data in _events(response, endpoint):
                if stop.is_set():
                    finish = StopReason.STOPPED
                    break
                usage = data.get("usage") or usage
                timings = data.get("timings") or timings
                for choice in data.get("choices") or ():
                    delta = choice.get("delta") or {}
                    text = delta.get("content") or ""
                    _gather_calls(calls, delta.get("tool_calls"))
                    finish = choice.get("finish_reason") or finish
                    if text:
                        first_at = first_at or time.monotonic()
                        yield text
        finally:
            response.close()
    if calls:
        first_at = first_at or time.monotonic()
        yield "".join(_tagged(call) for _, call in sorted(calls.items()))
    ended = time.monotonic()
    yield _done(finish, usage, timings, started, first_at, ended)


def _gather_calls(calls: dict[int, dict[str, str]], deltas: Any) -> None:
    """OpenAI streams a call in pieces: its name first, then its arguments' text in parts."""
    for piece in deltas or ():
        if not isinstance(piece, dict):
            continue
        call = calls.setdefault(int(piece.get("index", len(calls))), {"name": "", "arguments": ""})
        function = piece.get("function") or {}
        call["name"] += function.get("name") or ""
        call["arguments"] += function.get("arguments") or ""


def _tagged(call: dict[str, str]) -> str:
    try:
        arguments = json.loads(call["arguments"] or "{}")
    except ValueError:
        arguments = {}
    return (
        "<tool_call>" + json.dumps({"name": call["name"], "arguments": arguments}) + "</tool_call>"
    )


def _done(finish, usage, timings, started, first_at, ended) -> RemoteDone:
    n_generated = int(usage.get("completion_tokens") or timings.get("predicted_n") or 0)
    n_prompt = int(usage.get("prompt_tokens") or timings.get("prompt_n") or 0)
    ttft = (first_at or ended) - started
    decode_s = ended - (first_at or ended)
    if timings.get("predicted_ms") and n_generated > 1:
        # The server's own decode time: the network's pauses left out. Scaled so that the
        # (n-1)-step rate the stats line shows is the server's rate.
        decode_s = timings["predicted_ms"] / 1000 * (n_generated - 1) / n_generated
    stats = p.GenerationStats(
        n_prompt_tokens=n_prompt,
        n_prompt_tokens_reused=0,
        n_generated=n_generated,
        prefill_seconds=ttft,
        time_to_first_token=ttft,
        decode_seconds=decode_s if n_generated else 0.0,
    )
    reason = finish if finish == StopReason.STOPPED else _FINISH_REASONS.get(finish, StopReason.EOS)
    return RemoteDone(reason, stats, counted=n_generated > 0)


def _events(response: httpx.Response, endpoint: Endpoint) -> Iterator[dict[str, Any]]:
    try:
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                return
            try:
                data = json.loads(payload)
            except ValueError:
                raise RemoteError(
                    f"{endpoint.host} sent a reply that is not the OpenAI stream format."
                ) from None
            if isinstance(data, dict) and "error" in data:
                raise RemoteError(f"{endpoint.host} stopped the reply: {_error_text(data)}")
            if isinstance(data, dict):
                yield data
    except httpx.HTTPError as exc:
        raise RemoteError(
            f"The connection to {endpoint.host} broke during the reply ({_describe(exc)}). "
            "Check that the server is still running, then regenerate."
        ) from None


def _client(endpoint: Endpoint, timeout_s: float) -> httpx.Client:
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    timeout = httpx.Timeout(READ_TIMEOUT_S, connect=timeout_s)
    return httpx.Client(headers=headers, timeout=timeout, follow_redirects=False)


def _url(endpoint: Endpoint, path: str) -> str:
    return endpoint.base_url.rstrip("/") + path


def _send(client: httpx.Client, method: str, path: str, endpoint: Endpoint) -> httpx.Response:
    try:
        response = client.request(method, _url(endpoint, path))
    except httpx.HTTPError as exc:
        raise _unreachable(endpoint, exc) from None
    if response.status_code >= 400:
        raise _refused(endpoint, response)
    return response


def _json(response: httpx.Response, endpoint: Endpoint) -> Any:
    try:
        return response.json()
    except ValueError:
        raise RemoteError(
            f"{endpoint.host} did not answer in JSON. Is the address the server's API?"
        ) from None


def _unreachable(endpoint: Endpoint, exc: Exception) -> RemoteError:
    return RemoteError(
        f"Could not reach {endpoint.host} ({_describe(exc)}). Check the address, that the server "
        "is running and that this computer may connect to it."
    )


def _refused(endpoint: Endpoint, response: httpx.Response) -> RemoteError:
    status = response.status_code
    try:
        said = _error_text(response.json())
    except ValueError:
        said = response.text[:200].strip()
    said = f": {said}" if said else ""
    if status in (401, 403):
        return RemoteError(
            f"{endpoint.host} refused the API key ({status}{said}). Check the key in the "
            "remote server's settings."
        )
    if status == 404:
        return RemoteError(
            f"{endpoint.host} has no such API address ({response.request.url.path}). Use the "
            "address of its OpenAI-compatible API, usually ending in /v1."
        )
    return RemoteError(f"{endpoint.host} answered {status}{said}.")


def _error_text(body: Any) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or "")[:300]
    return str(error or "")[:300]


def _describe(exc: Exception) -> str:
    text = str(exc).strip()
    return text[:200] if text else type(exc).__name__
