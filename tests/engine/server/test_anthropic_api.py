"""Anthropic's Messages API on a running `hearth serve`, through Anthropic's own Python client
(which sends its key as `x-api-key`). The client no longer has sampling arguments, so
`temperature` goes in `extra_body`, as a client of another server would send it."""

import json

import pytest

anthropic = pytest.importorskip("anthropic")

TOOLS = [
    {
        "name": "get_weather",
        "description": "The weather in a city",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 30}},
            "required": ["city"],
        },
    }
]
GREEDY = {"temperature": 0}
SYSTEM = "You answer in one short sentence."
TURNS = [
    {"role": "user", "content": "Hello!"},
    {"role": "assistant", "content": [{"type": "text", "text": "Hello. How can I help?"}]},
    {"role": "user", "content": "What is the capital of France?"},
]


def test_a_multi_turn_message_with_a_system_prompt_comes_whole(anthropic_client, served):
    reply = anthropic_client.messages.create(
        model=served.model, system=SYSTEM, messages=TURNS, max_tokens=16, extra_body=GREEDY
    )
    assert reply.type == "message" and reply.role == "assistant"
    (block,) = reply.content
    assert block.type == "text" and block.text.strip()
    assert reply.stop_reason in ("end_turn", "max_tokens") and reply.stop_sequence is None
    assert 0 < reply.usage.output_tokens <= 16
    counted = anthropic_client.messages.count_tokens(
        model=served.model, system=SYSTEM, messages=TURNS
    )
    assert counted.input_tokens == reply.usage.input_tokens > 20  # the whole rendered prompt


def test_the_stream_follows_anthropics_event_order_and_matches_the_whole_reply(
    anthropic_client, served
):
    ask = {"model": served.model, "messages": TURNS[2:], "max_tokens": 12}
    whole = anthropic_client.messages.create(**ask, extra_body=GREEDY)
    # Read off the wire: the client drops `ping` events.
    status, body = served.request("POST", "/v1/messages", {**ask, **GREEDY, "stream": True})
    assert status == 200
    events = [
        (line.removeprefix("event: "), json.loads(data.removeprefix("data: ")))
        for line, data in (chunk.split("\n", 1) for chunk in body.strip().split("\n\n"))
    ]
    assert all(name == data["type"] for name, data in events)
    kinds = [name for name, _ in events]
    deltas = kinds.count("content_block_delta")
    assert kinds == [
        "message_start", "content_block_start", "ping", *["content_block_delta"] * deltas,
        "content_block_stop", "message_delta", "message_stop",
    ]  # fmt: skip
    assert deltas >= 1
    text = "".join(d["delta"]["text"] for name, d in events if name == "content_block_delta")
    assert text == whole.content[0].text
    end = events[-2][1]
    assert end["delta"]["stop_reason"] == whole.stop_reason
    assert end["usage"] == {"input_tokens": whole.usage.input_tokens,
                            "output_tokens": whole.usage.output_tokens}  # fmt: skip


def test_a_stop_sequence_ends_the_reply_and_is_named(anthropic_client, served):
    reply = anthropic_client.messages.create(
        model=served.model, max_tokens=40, extra_body=GREEDY, stop_sequences=["4"],
        messages=[{"role": "user", "content": "Count from 1 to 10."}],
    )  # fmt: skip
    assert reply.stop_reason == "stop_sequence" and reply.stop_sequence == "4"
    assert "4" not in reply.content[0].text


def test_a_forced_tool_comes_back_as_a_tool_use_block(anthropic_client, served):
    # (every edge of streamed tool_use blocks: with a fake engine, test_chat_apis.py; the forced
    # grammar makes each request on the real model slow)
    reply = anthropic_client.messages.create(
        model=served.model, max_tokens=40, extra_body=GREEDY, tools=TOOLS,
        tool_choice={"type": "tool", "name": "get_weather"},
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
    )  # fmt: skip
    assert reply.stop_reason == "tool_use"
    (use,) = reply.content
    assert use.type == "tool_use" and use.name == "get_weather" and use.id.startswith("toolu_")
    assert isinstance(use.input["city"], str)


def test_a_forced_tool_streams_as_a_tool_use_block(anthropic_client, served):
    """The same call streamed through the client's own event parser: a tool_use block whose
    input arrives as input_json_delta pieces, then stop_reason tool_use."""
    with anthropic_client.messages.stream(
        model=served.model, max_tokens=40, extra_body=GREEDY, tools=TOOLS,
        tool_choice={"type": "tool", "name": "get_weather"},
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
    ) as stream:  # fmt: skip
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "content_block_start" in kinds and "content_block_delta" in kinds
    assert final.stop_reason == "tool_use"
    (use,) = final.content
    assert use.type == "tool_use" and use.name == "get_weather"
    assert isinstance(use.input["city"], str)


def test_a_tool_result_can_be_sent_back(anthropic_client, served):
    reply = anthropic_client.messages.create(
        model=served.model, max_tokens=16, extra_body=GREEDY, tools=TOOLS,
        messages=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                                               "name": "get_weather",
                                               "input": {"city": "Paris"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": "Sunny, 24 C"}]},
        ],
    )  # fmt: skip
    assert reply.stop_reason in ("end_turn", "max_tokens", "tool_use")
    assert reply.content


def test_errors_come_in_anthropics_shape(anthropic_client, served):
    with pytest.raises(anthropic.NotFoundError) as caught:
        anthropic_client.messages.create(
            model="no-such-model", max_tokens=4, messages=[{"role": "user", "content": "Hi"}]
        )
    assert caught.value.body["type"] == "error"
    assert caught.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.BadRequestError, match="image"):
        anthropic_client.messages.create(
            model=served.model, max_tokens=4,
            messages=[{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": "AAAA"}}]}],
        )  # fmt: skip
    wrong_key = anthropic.Anthropic(
        base_url=f"http://127.0.0.1:{served.port}", api_key="wrong-key-0123456789", max_retries=0
    )
    with pytest.raises(anthropic.AuthenticationError):
        wrong_key.messages.create(
            model=served.model, max_tokens=4, messages=[{"role": "user", "content": "Hi"}]
        )
