"""A reply's speculative decoding in a few words, for the chat's stats line and `hearth chat`.

Only the protocol is imported: the window shows this and never loads llama.cpp.
"""

from __future__ import annotations

from engine.runtime.protocol import GenerationStats

LABELS = {"prompt_lookup": "prompt lookup", "draft_model": "draft model", "mtp": "MTP"}


def speculation_text(stats: GenerationStats) -> str:
    """ "prompt lookup: 75% of 40 drafts kept, 1.8x speed" ("" for a reply without it). The
    speed is against plain decode steps timed in the same reply (GenerationStats.speedup); a
    reply with too few of them states none rather than one it cannot stand behind."""
    if not stats.speculative:
        return ""
    label = LABELS.get(stats.speculative, stats.speculative)
    if not stats.n_drafted:
        text = f"{label}: nothing drafted"
    else:
        text = f"{label}: {stats.acceptance_rate:.0%} of {stats.n_drafted} drafts kept"
    if stats.speedup:
        text += f", {stats.speedup:.1f}x speed"
    return text
