"""A reply's speculative decoding in a few words, for the chat's stats line and `hearth chat`.

Only the protocol is imported: the window shows this and never loads llama.cpp.
"""

from __future__ import annotations

from engine.runtime.protocol import GenerationStats

LABELS = {"prompt_lookup": "prompt lookup", "draft_model": "draft model", "mtp": "MTP"}


def speculation_text(stats: GenerationStats) -> str:
    """ "prompt lookup: 75% of 40 drafts kept, 1.8x speed" ("" for a reply without it). The
    speed is against plain decode steps timed in the same reply (GenerationStats.speedup); a
    reply with too few of them states none rather than one it cannot stand behind. Where the
    engine does not guarantee a greedy reply plain decoding's text (llama.cpp on a GPU), the
    line says so and why (GenerationStats.speculative_caveat)."""
    if not stats.speculative:
        return ""
    if stats.speculative == "off":  # the engine chose not to (trial.py), and says why
        return stats.speculative_why
    label = LABELS.get(stats.speculative, stats.speculative)
    if stats.speculative_why:
        label += f" ({stats.speculative_why})"
    if not stats.n_drafted:
        text = f"{label}: nothing drafted"
    else:
        text = f"{label}: {stats.acceptance_rate:.0%} of {stats.n_drafted} drafts kept"
    if stats.speedup:
        text += f", {stats.speedup:.1f}x speed"
    if stats.speculative_caveat:
        text += f"; {stats.speculative_caveat}"
    return text
