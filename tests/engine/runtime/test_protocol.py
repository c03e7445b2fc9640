import io
import struct

import pytest

from engine.runtime import protocol as p

MESSAGES = [
    p.Load(params=p.ModelParams(path="/m/a model.gguf", n_ctx=8192, type_k="q8_0")),
    p.Generate(
        request_id=7,
        messages=(p.ChatMessage(role="user", content="héllo 🙂"),),
        sampling=p.SamplingParams(temperature=0.0, seed=3),
        max_tokens=5,
        stop=("</s>", "\n\n"),
    ),
    p.Generate(request_id=8, prompt="raw"),
    p.Stop(),
    p.Unload(),
    p.GetStatus(),
    p.Shutdown(),
    p.TokenText(request_id=1, text="\u00e9\U0001f642", n_tokens=2),
    p.GenerationDone(
        request_id=1,
        stop_reason="eos",
        stats=p.GenerationStats(
            n_prompt_tokens=10,
            n_prompt_tokens_reused=4,
            n_generated=3,
            prefill_seconds=0.5,
            time_to_first_token=0.6,
            decode_seconds=0.2,
        ),
    ),
    p.MemoryReport(
        model_bytes=1,
        context_bytes=2,
        process_rss_bytes=3,
        devices=(p.DeviceMemory(name="CUDA0", description="H100", free_bytes=4, total_bytes=5),),
    ),
    p.Status(state="idle", model_path=None, n_ctx=0, n_tokens_cached=0),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_survives_a_round_trip(msg):
    stream = io.BytesIO(p.encode(msg) + p.encode(msg))
    assert p.read_frame(stream) == msg
    assert p.read_frame(stream) == msg
    assert p.read_frame(stream) is None


def test_stats_rates():
    stats = MESSAGES[8].stats
    assert stats.decode_tokens_per_second == pytest.approx(2 / 0.2)
    assert stats.prefill_tokens_per_second == pytest.approx(6 / 0.5)


@pytest.mark.parametrize(
    "raw, why",
    [
        (struct.pack("<I", 5) + b"{'a'", "ended inside"),
        (struct.pack("<I", 4) + b"nope", "not JSON"),
        (struct.pack("<I", 9) + b'{"a": 1}\n', "not a message"),
        (struct.pack("<I", 24) + b'{"type": "os.system"}   ', "unknown message type"),
        (struct.pack("<I", 23) + b'{"type":"Stop","x":[1]}', None),
        (struct.pack("<I", p.MAX_FRAME_BYTES + 1), "over the"),
        (b"\x01\x00", "inside a frame"),
    ],
)
def test_bad_frames_raise_protocol_error(raw, why):
    stream = io.BytesIO(raw)
    if why is None:
        # Unknown fields are ignored, so an older GUI can talk to a newer worker.
        assert p.read_frame(stream) == p.Stop()
        return
    with pytest.raises(p.ProtocolError, match=why):
        p.read_frame(stream)
