"""What one step of a batch computes: every decoding sequence's next token, then as much of the
waiting prompts as the step's token budget leaves (chunked prefill).

A prompt that arrives while others decode is computed a chunk per step, between their tokens,
rather than in one long pass that would stall them all: each step does the decode rows first
(one token for each sequence that has one), then gives the rest of `budget` tokens to the
prompts in arrival order. The chunk that ends a prompt asks for logits, so that sequence
samples its first token in the same step and decodes from the next.

Pure: the Hearth engine's batch decoder (engine/runtime/hearth_batch.py) lays the rows out as
this plan says, the rows of one sequence together.

    plan_step(decoding=[7, 9], prompts=[(11, 1000)], budget=256)
    -> [Work(7, 1, True), Work(9, 1, True), Work(11, 254, False)]
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_BUDGET = 512  # tokens a step computes at most (the prefill's chunk size)
MIN_CHUNK = 16  # a prompt chunk is never cut below this while decode rows take the budget


@dataclass(frozen=True)
class Work:
    key: int  # the generation
    n_tokens: int  # 1 for a decode row, else the prompt chunk's length
    samples: bool  # its last row's logits are sampled this step


def plan_step(decoding: list[int], prompts: list[tuple[int, int]], budget: int) -> list[Work]:
    """The step's work: `decoding` are the generations with a token to decode, `prompts`
    (generation, tokens still to compute) in arrival order. Decode rows always go (at most 64
    sequences, well under any budget); prompts share what is left of `budget`, and the first
    waiting prompt gets at least MIN_CHUNK tokens so that many decoders never starve it."""
    work = [Work(key, 1, True) for key in decoding]
    room = budget - len(decoding)
    for i, (key, left) in enumerate(prompts):
        if left <= 0:
            continue
        if i == 0:
            room = max(room, min(MIN_CHUNK, left))
        if room <= 0:
            break
        take = min(left, room)
        work.append(Work(key, take, take == left))
        room -= take
    return work
