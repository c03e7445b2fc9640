"""Another machine's model as the chat's engine: any OpenAI-compatible server (`hearth serve`,
llama-server, Ollama, LM Studio) reached over HTTP (`openai_client`), where it is (`endpoints`:
the address and model last chosen) and its API key, kept in the OS keyring (`keys`). Qt-free;
the window streams a reply from a background thread.
"""
