"""MTP drafting: the model's own multi-token-prediction (NextN) layers, where the GGUF has them.

What it would take through llama-cpp-python 0.3.36 (docs/speculative.md has the whole account):
the vendored llama.cpp drafts with MTP in common/speculative.cpp (common_speculative_impl_
draft_mtp): the model is loaded with `load_mtp`, a second context of type
LLAMA_CONTEXT_TYPE_MTP is made with `ctx_other` set to the main context, and after every main
decode the MTP context is fed each token paired with the main model's NextN hidden row
(`llama_set_embeddings_nextn`, `llama_get_embeddings_nextn_ith`) through a `llama_batch_ext`
and `llama_process`. The binding exposes the load flag, the context type, `ctx_other`,
`llama_batch_ext_*` and `llama_process`, but not the two hidden-row calls: they are declared in
llama.cpp's staging header src/llama-ext.h (C++, "WIP, breaking changes allowed"), not in
llama.h, and exist in libllama.so only under C++-mangled names. Hearth does not call mangled
C++ symbols through ctypes (the next llama.cpp can change them silently), so MTP is detected and
reported here, not run.
"""

from __future__ import annotations

from engine.llama.driver import Context, EngineError, Model


def mtp_layers(model: Model) -> int:
    """How many MTP layers the loaded model carries (0: none)."""
    return model.n_mtp_layers()


def mtp_drafter(model: Model, ctx: Context):
    n = mtp_layers(model)
    if n == 0:
        raise EngineError(
            "This model has no MTP (multi-token prediction) layers; choose prompt lookup or a "
            "draft model instead."
        )
    raise EngineError(
        f"This model carries {n} MTP layer(s), but drafting with them needs llama.cpp calls "
        "that llama-cpp-python 0.3.36 does not expose (llama_get_embeddings_nextn_ith, "
        "docs/speculative.md); choose prompt lookup or a draft model instead."
    )
