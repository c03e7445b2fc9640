"""OpenAI's Responses API on a running `hearth serve`, through OpenAI's own Python client."""

import json

import pytest

openai = pytest.importorskip("openai")

TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 30}},
            "required": ["city"],
        },
    }
]
FORCED = {"type": "function", "name": "get_weather"}
WEATHER = "What is the weather in Paris?"


def test_a_string_input_with_instructions_comes_whole(openai_client, served):
    reply = openai_client.responses.create(
        model=served.model, instructions="Answer in one short sentence.",
        input="What is the capital of France?", max_output_tokens=16, temperature=0,
    )  # fmt: skip
    assert reply.object == "response" and reply.status in ("completed", "incomplete")
    assert reply.output_text.strip()
    assert reply.output[0].type == "message" and reply.output[0].role == "assistant"
    assert 0 < reply.usage.output_tokens <= 16
    assert reply.usage.total_tokens == reply.usage.input_tokens + reply.usage.output_tokens
    if reply.status == "incomplete":
        assert reply.incomplete_details.reason == "max_output_tokens"
    assert openai_client.responses.retrieve(reply.id).output_text == reply.output_text


def test_previous_response_id_continues_the_conversation(openai_client, served):
    first = openai_client.responses.create(
        model=served.model, input=[{"role": "user", "content": "My name is Ada."}],
        max_output_tokens=4, temperature=0,
    )  # fmt: skip
    follow = {"role": "user", "content": [{"type": "input_text", "text": "What is my name?"}]}
    chained = openai_client.responses.create(
        model=served.model, previous_response_id=first.id, input=[follow],
        max_output_tokens=4, temperature=0,
    )  # fmt: skip
    spelled_out = openai_client.responses.create(
        model=served.model, max_output_tokens=4, temperature=0,
        input=[{"role": "user", "content": "My name is Ada."},
               {"role": "assistant", "content": [{"type": "output_text",
                                                  "text": first.output_text}]}, follow],
    )  # fmt: skip
    # The same conversation, whether kept by the server or sent whole.
    assert chained.usage.input_tokens == spelled_out.usage.input_tokens
    assert chained.output_text == spelled_out.output_text
    assert chained.previous_response_id == first.id
    with pytest.raises(openai.NotFoundError, match="no response"):
        openai_client.responses.create(
            model=served.model, previous_response_id="resp-unknown", input="Hi",
            max_output_tokens=4,
        )  # fmt: skip


def test_the_stream_sends_the_responses_events_in_order(openai_client, served):
    ask = {"model": served.model, "input": "Say hello.", "max_output_tokens": 8, "temperature": 0}
    whole = openai_client.responses.create(**ask)
    events = list(openai_client.responses.create(**ask, stream=True))
    kinds = [e.type for e in events]
    deltas = kinds.count("response.output_text.delta")
    final = "response.completed" if whole.status == "completed" else "response.incomplete"
    assert kinds == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added", *["response.output_text.delta"] * deltas,
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        final,
    ]  # fmt: skip
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == whole.output_text == events[-1].response.output_text
    assert events[-1].response.usage.output_tokens == whole.usage.output_tokens


def test_a_forced_function_call_streams_its_arguments(openai_client, served):
    """The call streamed through the client: output_item.added, the arguments' deltas and
    done, then response.completed holding the same call."""
    events = list(openai_client.responses.create(
        model=served.model, input=WEATHER, tools=TOOLS, tool_choice=FORCED,
        max_output_tokens=40, temperature=0, stream=True,
    ))  # fmt: skip
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    (call,) = events[-1].response.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == json.loads(done.arguments)


def test_a_forced_function_call_then_its_output_sent_back(openai_client, served):
    # (every edge of streamed function calls: with a fake engine, test_chat_apis.py; the forced
    # grammar makes each request on the real model slow)
    reply = openai_client.responses.create(
        model=served.model, input=WEATHER, tools=TOOLS, tool_choice=FORCED,
        max_output_tokens=40, temperature=0,
    )  # fmt: skip
    (call,) = reply.output
    assert call.type == "function_call" and call.name == "get_weather" and call.call_id
    assert isinstance(json.loads(call.arguments)["city"], str)
    answered = openai_client.responses.create(
        model=served.model, previous_response_id=reply.id, tools=TOOLS, max_output_tokens=8,
        temperature=0,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "Sunny"}],
    )  # fmt: skip
    assert answered.status in ("completed", "incomplete") and answered.output
    assert answered.usage.input_tokens > reply.usage.input_tokens  # the call and its output


def test_unusable_input_gets_a_400_naming_it(openai_client, served):
    with pytest.raises(openai.BadRequestError, match=r"input\[0\]"):
        openai_client.responses.create(
            model=served.model, max_output_tokens=4,
            input=[{"role": "user", "content": [{"type": "input_image",
                                                 "image_url": "http://x/y.png"}]}],
        )  # fmt: skip
    with pytest.raises(openai.BadRequestError, match="function tools only"):
        openai_client.responses.create(
            model=served.model, max_output_tokens=4, input="Hi",
            tools=[{"type": "web_search_preview"}],
        )  # fmt: skip
