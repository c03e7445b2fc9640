"""The Ollama routes of a running `hearth serve`, over plain HTTP as Ollama's clients use them."""

import http.client
import json


def _ndjson(served, path: str, body: dict) -> list[dict]:
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
    try:
        # Ollama's documentation sends bodies with `curl -d`: form data by its Content-Type.
        conn.request("POST", path, json.dumps(body), {
            "Authorization": f"Bearer {served.key}",
            "Content-Type": "application/x-www-form-urlencoded",
        })  # fmt: skip
        response = conn.getresponse()
        assert response.status == 200, response.read()
        assert response.getheader("content-type").startswith("application/x-ndjson")
        return [json.loads(line) for line in response.read().decode().splitlines() if line]
    finally:
        conn.close()


def test_version_and_root(served):
    assert served.request("GET", "/api/version")[1]["version"]
    assert served.request("GET", "/") == (200, "Hearth is running")


def test_tags_and_ps_list_the_loaded_model(served):
    status, tags = served.request("GET", "/api/tags")
    assert status == 200
    (entry,) = tags["models"]
    assert entry["name"] == f"{served.model}:latest"
    assert entry["details"]["format"] == "gguf" and entry["size"] > 0
    status, running = served.request("GET", "/api/ps")
    assert status == 200 and running["models"][0]["name"] == entry["name"]


def test_show_describes_the_model(served):
    status, shown = served.request("POST", "/api/show", {"model": f"{served.model}:latest"})
    assert status == 200
    assert shown["details"]["family"] == "llama"
    assert shown["model_info"]["general.parameter_count"] > 100_000_000


def test_chat_streams_ndjson_and_ends_with_counts(served):
    lines = _ndjson(served, "/api/chat", {
        "model": served.model,
        "messages": [{"role": "user", "content": "Say hello."}],
        "options": {"temperature": 0, "num_predict": 12},
    })  # fmt: skip
    assert all(not line["done"] for line in lines[:-1]) and lines[-1]["done"]
    text = "".join(line["message"]["content"] for line in lines)
    assert text.strip()
    final = lines[-1]
    assert final["done_reason"] in ("stop", "length")
    assert final["prompt_eval_count"] > 0 and 0 < final["eval_count"] <= 12


def test_generate_whole_with_json_format(served):
    status, reply = served.request("POST", "/api/generate", {
        "model": served.model, "prompt": "Describe a dog as JSON.", "stream": False,
        "format": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}},
                   "required": ["name"]},
        "options": {"temperature": 0, "num_predict": 40},
    })  # fmt: skip
    assert status == 200 and reply["done"] is True
    assert isinstance(json.loads(reply["response"])["name"], str)


def test_generate_streams_a_raw_prompt(served):
    lines = _ndjson(served, "/api/generate", {
        "model": served.model, "prompt": "The capital of France is", "raw": True,
        "options": {"temperature": 0, "num_predict": 5},
    })  # fmt: skip
    assert "".join(line["response"] for line in lines).strip()
    assert lines[-1]["eval_count"] == 5


def test_an_empty_request_answers_as_ollama_does_when_loading(served):
    status, reply = served.request("POST", "/api/chat", {"model": served.model, "messages": []})
    assert status == 200 and reply["done"] is True and reply["done_reason"] == "load"


def test_errors_take_ollamas_shape(served):
    status, reply = served.request("POST", "/api/chat", {"model": "llama3:8b", "messages": []})
    assert status == 404 and isinstance(reply["error"], str) and "not loaded" in reply["error"]
