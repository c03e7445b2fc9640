"""Images through llama.cpp's multimodal library (mtmd), on a vision model written with random
weights for the pipeline: a tiny Gemma-3-style projector (testkit/tiny_vision.py) beside the
starter model. Its replies are noise; what is checked is that an image goes in, is counted in
the prompt, reuses its cache in the next turn, and that a reply comes out."""

from __future__ import annotations

import base64

import pytest

from engine.runtime import protocol as p
from engine.runtime.engine_api import NO_PROJECTOR
from testkit.tiny_vision import TINY_IMAGE_TOKENS, tiny_png, write_tiny_projector
from tests.engine.runtime.conftest import GREEDY, RunningEngine

STARTER_EMBD = 576  # SmolLM2-135M's embedding length


@pytest.fixture(scope="module")
def projector(tmp_path_factory):
    return str(write_tiny_projector(tmp_path_factory.mktemp("vision") / "mmproj-tiny.gguf",
                                    text_embd=STARTER_EMBD))  # fmt: skip


@pytest.fixture(scope="module")
def vision_engine(starter_path, projector):
    running = RunningEngine()
    loaded = running.load(starter_path, n_ctx=1024, mmproj_path=projector)
    assert isinstance(loaded, p.ModelLoaded), loaded
    yield running, loaded
    running.close()


def _image(seed: int = 0) -> str:
    return base64.b64encode(tiny_png(40, 30, seed=seed)).decode()


def _ask(text: str, *images: str) -> p.ChatMessage:
    return p.ChatMessage(role="user", content=text, images=images)


def test_an_image_goes_in_a_reply_comes_out_and_the_next_turn_reuses_its_cache(vision_engine):
    engine, loaded = vision_engine
    assert loaded.vision and loaded.image_tokens == TINY_IMAGE_TOKENS
    first = [_ask("Describe.", _image())]
    texts, done = engine.run(messages=first, max_tokens=3, sampling=GREEDY)
    assert isinstance(done, p.GenerationDone), done
    assert done.stats.n_generated >= 1 and "".join(texts)
    # the image's positions are in the prompt (with Gemma 3's start/end-of-image words)
    assert done.stats.n_prompt_tokens > TINY_IMAGE_TOKENS + 4
    follow = [*first, p.ChatMessage(role="assistant", content="".join(texts)), _ask("And?")]
    _, again = engine.run(messages=follow, max_tokens=1, sampling=GREEDY)
    assert isinstance(again, p.GenerationDone), again
    # the first turn, image included, stayed cached: only the new words were computed
    assert again.stats.n_prompt_tokens_reused >= done.stats.n_prompt_tokens - 1


def test_an_image_that_is_not_one_is_refused_with_the_reason(vision_engine):
    engine, _ = vision_engine
    junk = base64.b64encode(b"RIFF\0\0\0\0WEBPVP8 ").decode()
    _, failed = engine.run(messages=[_ask("Describe.", junk)], max_tokens=2)
    assert isinstance(failed, p.GenerationFailed) and "WebP" in failed.message


def test_loads_with_and_without_a_projector(engine, starter_path, projector, tmp_path):
    """One worker, three loads: a projector of another model is refused at the load with
    llama.cpp's reason; the Hearth engine hands a vision model to llama.cpp with one line; a
    model loaded without a projector refuses an image, saying why and what to do."""
    wrong = write_tiny_projector(tmp_path / "mmproj-wide.gguf", text_embd=STARTER_EMBD * 2)
    failed = engine.load(starter_path, n_ctx=512, mmproj_path=str(wrong))
    assert isinstance(failed, p.LoadFailed)
    assert "vision projector" in failed.message and "another model" in failed.message
    assert any("mismatch" in line for line in failed.details)

    loaded = engine.load(starter_path, n_ctx=512, mmproj_path=projector, engine="hearth")
    assert isinstance(loaded, p.ModelLoaded), loaded
    assert loaded.engine == "llama" and loaded.vision
    assert "hands this vision model to llama.cpp" in loaded.engine_note

    plain = engine.load(starter_path, n_ctx=512)
    assert isinstance(plain, p.ModelLoaded) and not plain.vision
    _, refused = engine.run(messages=[_ask("Describe.", _image())], max_tokens=2)
    assert isinstance(refused, p.GenerationFailed) and refused.message == NO_PROJECTOR
