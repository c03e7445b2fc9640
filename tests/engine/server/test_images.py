"""Images in API requests: OpenAI `image_url` parts (data: URLs; http(s) only when allowed) and
Ollama `images`, with their limits, against a model with and without a vision projector."""

from __future__ import annotations

import base64
import os

import pytest

from engine.chat.images import MAX_IMAGES
from engine.runtime import protocol as p
from engine.runtime.engine_api import NO_PROJECTOR
from engine.server.config import Limits
from engine.server.errors import APIError
from engine.server.images import REMOTE_REFUSED
from engine.server.openai_chat import plan_chat
from engine.server.openai_schema import ChatCompletionRequest
from testkit.tiny_vision import png_from_rows, tiny_png, write_tiny_projector
from tests.engine.server.conftest import serving

PNG = tiny_png(12, 8)
DATA_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
BOMB = png_from_rows(1, 1, b"\0\0\0\0", declared=(50_000, 50_000))


def _model(vision: bool) -> p.ModelLoaded:
    return p.ModelLoaded(
        path="m.gguf", description="", n_ctx=512, n_ctx_train=512, n_params=1, size_bytes=1,
        n_layers=1, n_gpu_layers=0, flash_attn="off", chat_template="chatml", load_seconds=0.0,
        vision=vision,
    )  # fmt: skip


def _ask(*parts) -> ChatCompletionRequest:
    return ChatCompletionRequest(messages=[{"role": "user", "content": list(parts)}])


def _image(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


TEXT = {"type": "text", "text": "What is this?"}


def test_a_data_url_image_goes_to_the_engine_with_its_message():
    plan = plan_chat(_ask(_image(DATA_URL), TEXT), _model(True), Limits())
    [message] = plan.requests[0].messages
    assert message.content == "What is this?"
    assert message.images == (base64.b64encode(PNG).decode(),)


@pytest.mark.parametrize(
    "parts, vision, status, words",
    [
        ((_image("https://example.com/cat.png"), TEXT), True, 400, REMOTE_REFUSED),
        ((_image("file:///etc/passwd"),), True, 400, "must be a data: URL"),
        ((_image("data:image/png,rawbytes"),), True, 400, "base64"),
        ((_image(""),), True, 400, "needs a url"),
        (
            (_image("data:image/png;base64," + base64.b64encode(BOMB).decode()),),
            True,
            400,
            "50,000×50,000",
        ),
        ((_image(DATA_URL),) * (MAX_IMAGES + 1), True, 413, f"at most {MAX_IMAGES}"),
        ((_image(DATA_URL), TEXT), False, 400, NO_PROJECTOR),
        (({"type": "input_audio", "input_audio": {}},), True, 400, "text and image_url"),
    ],
)
def test_refusals_say_why(parts, vision, status, words):
    with pytest.raises(APIError) as caught:
        plan_chat(_ask(*parts), _model(vision), Limits())
    assert caught.value.status == status and words in caught.value.message


def test_a_remote_image_is_fetched_only_when_the_server_allows_it():
    fetched = []

    def fetch(url: str) -> bytes:
        fetched.append(url)
        return PNG

    plan = plan_chat(_ask(_image("https://example.com/cat.png")), _model(True), Limits(), fetch)
    assert fetched == ["https://example.com/cat.png"]
    assert plan.requests[0].messages[0].images == (base64.b64encode(PNG).decode(),)


def test_a_model_without_a_projector_refuses_images_over_http(served):
    status, body = served.request("POST", "/v1/chat/completions", {
        "model": served.model, "max_tokens": 1,
        "messages": [{"role": "user", "content": [_image(DATA_URL), TEXT]}],
    })  # fmt: skip
    assert status == 400 and body["error"]["message"] == NO_PROJECTOR
    status, body = served.request("POST", "/api/chat", {
        "model": served.model, "stream": False,
        "messages": [{"role": "user", "content": "?", "images": [base64.b64encode(PNG).decode()]}],
    })  # fmt: skip
    assert status == 400 and "vision projector" in body["error"]


@pytest.fixture(scope="module")
def served_vision(starter_model, tmp_path_factory):
    """`hearth serve` on the starter model with a tiny random projector beside it."""
    folder = tmp_path_factory.mktemp("vlm")
    os.symlink(starter_model, folder / starter_model.name)
    write_tiny_projector(folder / "mmproj-F16.gguf", text_embd=576)
    args = [str(folder / starter_model.name), "--parallel", "1", "--ctx", "512"]
    yield from serving(tmp_path_factory, starter_model.name.removesuffix(".gguf"), args)


def test_images_in_through_openai_and_ollama_replies_out(served_vision):
    status, body = served_vision.request("POST", "/v1/chat/completions", {
        "model": served_vision.model, "max_tokens": 2, "temperature": 0,
        "messages": [{"role": "user", "content": [_image(DATA_URL), TEXT]}],
    })  # fmt: skip
    assert status == 200, body
    assert body["usage"]["prompt_tokens"] > 4 and body["usage"]["completion_tokens"] >= 1
    status, body = served_vision.request("POST", "/api/generate", {
        "model": served_vision.model, "stream": False, "prompt": "What is this?",
        "images": [base64.b64encode(PNG).decode()], "options": {"num_predict": 2},
    })  # fmt: skip
    assert status == 200 and body["done"], body
    status, body = served_vision.request("POST", "/api/show", {"model": served_vision.model})
    assert "vision" in body["capabilities"]
