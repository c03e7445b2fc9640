"""How full the model's context is. Fitting a conversation into it is the worker's job (it has
the tokenizer: engine/chat/context_fit.py); the window only shows what the worker reported.
"""

from __future__ import annotations

from engine.runtime import protocol as p


def used_tokens(stats: p.GenerationStats) -> int:
    """Tokens in the context after a reply: its prompt plus what it generated."""
    return stats.n_prompt_tokens + stats.n_generated
