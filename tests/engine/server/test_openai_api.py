"""The OpenAI routes of a running `hearth serve`, through OpenAI's own Python client."""

import json

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 30}},
                "required": ["city"],
            },
        },
    }
]
ASK = [{"role": "user", "content": "What is the capital of France?"}]


def test_the_loaded_model_is_listed(openai_client, served):
    models = openai_client.models.list()
    assert [m.id for m in models.data] == [served.model]


def test_a_chat_completion_comes_whole_with_usage(openai_client, served):
    reply = openai_client.chat.completions.create(
        model=served.model, messages=ASK, max_tokens=16, temperature=0
    )
    choice = reply.choices[0]
    assert choice.message.role == "assistant" and choice.message.content.strip()
    assert choice.finish_reason in ("stop", "length")
    assert reply.usage.prompt_tokens > 5
    assert 0 < reply.usage.completion_tokens <= 16
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_a_streamed_chat_matches_the_whole_one_and_ends_with_usage(openai_client, served):
    whole = openai_client.chat.completions.create(
        model=served.model, messages=ASK, max_tokens=16, temperature=0
    )
    stream = openai_client.chat.completions.create(
        model=served.model, messages=ASK, max_tokens=16, temperature=0, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = list(stream)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] in ("stop", "length") and not any(finishes[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    assert content == whole.choices[0].message.content


def test_stop_strings_end_the_reply(openai_client, served):
    reply = openai_client.chat.completions.create(
        model=served.model, messages=[{"role": "user", "content": "Count from 1 to 10."}],
        max_tokens=40, temperature=0, stop=["4"],
    )  # fmt: skip
    assert "4" not in reply.choices[0].message.content
    assert reply.choices[0].finish_reason == "stop"


def test_a_required_tool_call_comes_back_as_tool_calls(openai_client, served):
    reply = openai_client.chat.completions.create(
        model=served.model, max_tokens=40, temperature=0, tools=TOOLS, tool_choice="required",
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
    )  # fmt: skip
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and call.id
    assert isinstance(json.loads(call.function.arguments)["city"], str)


def test_a_named_tool_call_streams_as_a_tool_call_delta(openai_client, served):
    stream = openai_client.chat.completions.create(
        model=served.model, max_tokens=40, temperature=0, tools=TOOLS, stream=True,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        messages=[{"role": "user", "content": "Weather in Rome?"}],
    )  # fmt: skip
    chunks = [c for c in stream if c.choices]
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert len(calls) == 1 and calls[0].function.name == "get_weather"
    json.loads(calls[0].function.arguments)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_a_tool_result_can_be_sent_back(openai_client, served):
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}  # fmt: skip
    reply = openai_client.chat.completions.create(
        model=served.model, max_tokens=16, temperature=0, tools=TOOLS,
        messages=[*ASK, {"role": "assistant", "content": None, "tool_calls": [call]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 24 C"}],
    )  # fmt: skip
    assert reply.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_a_json_schema_reply_always_parses_and_follows_the_schema(openai_client, served):
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer"},
            "pets": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3},
        },
        "required": ["name", "age", "pets"],
    }
    for seed in (1, 2):
        reply = openai_client.chat.completions.create(
            model=served.model, max_tokens=80, temperature=0.8, seed=seed,
            messages=[{"role": "user", "content": "Describe a person."}],
            response_format={"type": "json_schema",
                             "json_schema": {"name": "person", "schema": schema}},
        )  # fmt: skip
        assert reply.choices[0].finish_reason == "stop"
        person = json.loads(reply.choices[0].message.content)
        assert isinstance(person["name"], str) and isinstance(person["age"], int)
        assert isinstance(person["pets"], list) and len(person["pets"]) <= 3


def test_json_object_mode_gives_an_object(openai_client, served):
    reply = openai_client.chat.completions.create(
        model=served.model, max_tokens=60, temperature=0, response_format={"type": "json_object"},
        messages=[{"role": "user", "content": "A cat, as JSON."}],
    )  # fmt: skip
    if reply.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(reply.choices[0].message.content), dict)
    else:  # cut by max_tokens: still the start of an object
        assert reply.choices[0].message.content.lstrip().startswith("{")


def test_a_fixed_seed_repeats_the_reply(openai_client, served):
    def ask():
        return (
            openai_client.chat.completions.create(
                model=served.model, messages=ASK, max_tokens=12, temperature=1.0, seed=42
            )
            .choices[0]
            .message.content
        )

    assert ask() == ask()


def test_log_probabilities_are_returned(openai_client, served):
    reply = openai_client.chat.completions.create(
        model=served.model, messages=ASK, max_tokens=4, temperature=0, logprobs=True,
        top_logprobs=3,
    )  # fmt: skip
    entries = reply.choices[0].logprobs.content
    assert len(entries) == reply.usage.completion_tokens
    assert "".join(e.token for e in entries) == reply.choices[0].message.content
    assert all(len(e.top_logprobs) == 3 and e.logprob <= 0 for e in entries)


def test_n_choices_come_in_one_reply(openai_client, served):
    reply = openai_client.chat.completions.create(
        model=served.model, messages=ASK, max_tokens=8, temperature=1.0, seed=7, n=2
    )
    assert [c.index for c in reply.choices] == [0, 1]
    assert all(c.message.content for c in reply.choices)
    # Usage counts the tokens of both choices (each at most max_tokens).
    assert 2 <= reply.usage.completion_tokens <= 16


def test_a_text_completion_streamed_and_whole(openai_client, served):
    whole = openai_client.completions.create(
        model=served.model, prompt="The capital of France is", max_tokens=6, temperature=0
    )
    streamed = openai_client.completions.create(
        model=served.model, prompt="The capital of France is", max_tokens=6, temperature=0,
        stream=True,
    )  # fmt: skip
    text = "".join(c.choices[0].text for c in streamed if c.choices)
    assert text == whole.choices[0].text and text.strip()
    assert whole.usage.completion_tokens == 6


def test_embeddings_are_unit_vectors_in_input_order(openai_client, served):
    import math

    inputs = ["a cat", "a quarterly revenue spreadsheet", "a cat"]
    reply = openai_client.embeddings.create(model=served.model, input=inputs)
    vectors = [d.embedding for d in sorted(reply.data, key=lambda d: d.index)]
    assert len(vectors) == 3 and len(vectors[0]) == 576  # SmolLM2-135M's n_embd
    assert all(math.isclose(math.hypot(*v), 1.0, rel_tol=1e-4) for v in vectors)
    assert vectors[0] == vectors[2] and vectors[0] != vectors[1]
    assert reply.usage.prompt_tokens >= 6
    # OpenAI's client asks for base64 unless told otherwise; both decode to the same numbers.
    floats = (
        openai_client.embeddings.create(model=served.model, input="a cat", encoding_format="float")
        .data[0]
        .embedding
    )
    assert all(math.isclose(x, y, abs_tol=1e-6) for x, y in zip(floats, vectors[0], strict=True))


def test_the_openapi_page_lists_every_route(served):
    status, schema = served.request("GET", "/openapi.json")
    assert status == 200
    assert {"/v1/chat/completions", "/v1/completions", "/v1/models", "/api/chat",
            "/api/generate", "/api/tags", "/api/show", "/api/ps", "/api/version"} <= set(
        schema["paths"])  # fmt: skip
    assert served.request("GET", "/docs")[0] == 200
