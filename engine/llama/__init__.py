"""The llama.cpp boundary: llama-cpp-python's ctypes bindings, owned handles and llama.cpp's own
log and device list, with their own parameter types (params.py). Nothing else in Hearth imports
`llama_cpp`, so a bump of llama-cpp-python touches this folder.

    driver.py   Model, Context: owning wrappers over the C API (worker process only)
    sampler.py  the sampler chain, and a grammar checked within a per-token deadline
    log.py      llama.cpp's log, captured: buffer sizes, overridden tensors, fatal lines
    devices.py  the backends' devices as llama.cpp sees them (ggml backend registry)
    probe.py    `python -m engine.llama.probe`: that device list from a child process
    params.py   ModelSettings, ContextSettings, SamplerSettings
    batch.py    SequenceBatch: tokens of several sequences for one llama_decode (API server)
    grammar.py  JSON schemas as GBNF grammars (structured output)
"""
