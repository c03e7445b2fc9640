"""The local HTTP API (OpenAI and Ollama shapes) over the engine worker; see app.py."""
