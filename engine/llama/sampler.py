"""llama.cpp's sampler chain in C, and a grammar (structured output) checked within a deadline.

The chain: penalties, top-k, top-p, min-p, temperature, then a draw; temperature <= 0 selects
the most likely token (greedy), which is deterministic.

With a grammar, checking it against the whole vocabulary at every step is slow (seconds per
token for a free-form JSON grammar and a 50k vocabulary). So, as llama.cpp's own
`common_sampler` does, the token is first drawn without the grammar and only checked against
it; only when the grammar rejects it is the draw made again with the grammar applied first.
The output follows the grammar either way.

That second draw is where a stranger's grammar costs: llama.cpp's grammar sampler follows every
parse the grammar allows at once and checks each candidate token against all of them, inside
one C call nothing can interrupt. So the vocabulary is checked here in slices of
GRAMMAR_SLICE tokens, one call each, with the token's deadline (`grammar_seconds`) looked at
between them: a token whose check outlasts it ends the generation with GrammarTooSlow, which
says so, instead of holding the engine for minutes. The server bounds the grammar's ambiguity
before translation (engine/server/schema_bounds.py), so ordinary schemas stay far inside.
"""

from __future__ import annotations

import ctypes
import time

import llama_cpp.llama_cpp as C

from engine.llama.driver import Context, EngineError, Model
from engine.llama.params import SamplerSettings

GRAMMAR_SLICE = 4096  # vocabulary entries checked against the grammar in one C call


class GrammarTooSlow(EngineError):
    """One token's grammar check outlasted its deadline; the message says how long and why."""


class Sampler:
    """A chain for one generation's settings, with its grammar if it has one."""

    def __init__(self, model: Model, sp: SamplerSettings):
        self._attached_to: Context | None = None
        self._grammar = None
        self._handle = _sampler_chain(model, sp)
        self.grammar_seconds = sp.grammar_seconds
        if sp.grammar:
            grammar = C.llama_sampler_init_grammar(model.vocab, sp.grammar.encode(), b"root")
            if not grammar:
                self.close()
                raise EngineError(
                    "llama.cpp could not parse the output grammar (the engine's last lines say "
                    "where). Check the JSON schema or grammar sent with the request."
                )
            self._grammar = grammar
            self._candidates = _Candidates(model.n_vocab)

    def attach(self, ctx: Context) -> bool:
        """Run the chain inside the model's graph on the output device (llama.cpp's backend
        sampling): only the chosen token comes back instead of the whole vocabulary's logits.
        False if llama.cpp cannot (then sampling stays on the CPU)."""
        if self._grammar is None and C.llama_set_sampler(ctx.handle, 0, self._handle):
            self._attached_to = ctx
            return True
        return False

    @property
    def in_graph(self) -> bool:
        """Whether the chain is attached to a context's graph: `sample` then returns the token
        drawn there (a speculative step's rows included), and no logits come back."""
        return self._attached_to is not None

    def reset(self) -> None:
        """Start over (a new draw from the seed, no penalty history) for a new generation."""
        C.llama_sampler_reset(self._handle)
        if self._grammar is not None:
            C.llama_sampler_reset(self._grammar)

    def sample(self, ctx: Context, index: int = -1) -> int:
        """Pick the next token from the output at batch position `index` (-1: the last one),
        and record it for penalties and the grammar. GrammarTooSlow past the deadline."""
        if self._grammar is None:
            return C.llama_sampler_sample(self._handle, ctx.handle, index)
        started = time.monotonic()
        logits = C.llama_get_logits_ith(ctx.handle, index)
        candidates = self._candidates
        token = candidates.draw(self._handle, logits)
        if not candidates.allows(self._grammar, token):
            candidates.fill(logits)
            self._mask_by_grammar(started)
            token = candidates.draw_filled(self._handle)
        C.llama_sampler_accept(self._handle, token)
        C.llama_sampler_accept(self._grammar, token)
        return token

    def _mask_by_grammar(self, started: float) -> None:
        deadline = started + self.grammar_seconds
        candidates = self._candidates
        for start in range(0, candidates.n, GRAMMAR_SLICE):
            if time.monotonic() > deadline:
                raise GrammarTooSlow(
                    f"The output grammar took longer than the limit of {self.grammar_seconds:g} s "
                    "to check one token, and the reply was stopped. A response_format or format "
                    "schema with many alternatives that begin alike makes each token this slow: "
                    "simplify it."
                )
            candidates.apply_to_slice(self._grammar, start, GRAMMAR_SLICE)

    def close(self) -> None:
        if self._attached_to is not None:
            C.llama_set_sampler(self._attached_to.handle, 0, None)
            self._attached_to = None
        for name in ("_handle", "_grammar"):
            handle = getattr(self, name)
            if handle is not None:
                C.llama_sampler_free(handle)
                setattr(self, name, None)


class _Candidates:
    """The whole vocabulary as llama_token_data, filled from a logits row, allocated once."""

    def __init__(self, n_vocab: int):
        import numpy as np  # after llama.cpp's libraries: see engine/runtime/logit_trace.py

        self.n = n_vocab
        self.data = (C.llama_token_data * n_vocab)()
        self._view = np.frombuffer(
            self.data, dtype=np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
        )
        self._ids = np.arange(n_vocab, dtype=np.int32)
        self._whole = C.llama_token_data_array(self.data, n_vocab, -1, False)
        self._one = (C.llama_token_data * 1)()
        self._one_array = C.llama_token_data_array(self._one, 1, -1, False)
        self._slice = C.llama_token_data_array(self.data, 0, -1, False)
        self._size = ctypes.sizeof(C.llama_token_data)

    def fill(self, logits) -> None:
        import numpy as np

        view = self._view
        view["id"] = self._ids
        view["logit"] = np.ctypeslib.as_array(logits, shape=(self.n,))
        view["p"] = 0.0
        whole = self._whole
        whole.data = self.data  # a sampler of the chain may have pointed it at its own buffer
        whole.size, whole.selected, whole.sorted = self.n, -1, False

    def draw(self, chain, logits) -> int:
        """The chain's draw from `logits`, without recording it (penalties see only the
        token finally chosen)."""
        self.fill(logits)
        return self.draw_filled(chain)

    def draw_filled(self, chain) -> int:
        whole = self._whole
        C.llama_sampler_apply(chain, ctypes.byref(whole))
        return whole.data[whole.selected].id

    def allows(self, grammar, token: int) -> bool:
        one = self._one[0]
        one.id, one.logit, one.p = token, 1.0, 0.0
        self._one_array.size, self._one_array.selected = 1, -1
        C.llama_sampler_apply(grammar, ctypes.byref(self._one_array))
        return self._one[0].logit != float("-inf")

    def apply_to_slice(self, grammar, start: int, length: int) -> None:
        """The grammar's mask (a rejected token's logit becomes -inf) on entries start.."""
        part = self._slice
        part.data = ctypes.cast(
            ctypes.addressof(self.data) + start * self._size, ctypes.POINTER(C.llama_token_data)
        )
        part.size, part.selected, part.sorted = min(length, self.n - start), -1, False
        C.llama_sampler_apply(grammar, ctypes.byref(part))


def _sampler_chain(model: Model, sp: SamplerSettings):
    """A new sampler chain for `sp` (the grammar, when there is one, is applied apart)."""
    chain = C.llama_sampler_chain_init(C.llama_sampler_chain_default_params())
    add = lambda s: C.llama_sampler_chain_add(chain, s)  # noqa: E731
    penalised = sp.presence_penalty != 0.0 or sp.frequency_penalty != 0.0
    if (sp.repeat_penalty != 1.0 or penalised) and sp.repeat_last_n != 0:
        add(
            C.llama_sampler_init_penalties(
                model.n_vocab,
                sp.repeat_last_n,
                sp.repeat_penalty,
                sp.frequency_penalty,
                sp.presence_penalty,
            )
        )
    if sp.temperature <= 0:
        add(C.llama_sampler_init_greedy())
        return chain
    if sp.top_k > 0:
        add(C.llama_sampler_init_top_k(sp.top_k))
    if 0 < sp.top_p < 1:
        add(C.llama_sampler_init_top_p(sp.top_p, 1))
    if sp.min_p > 0:
        add(C.llama_sampler_init_min_p(sp.min_p, 1))
    add(C.llama_sampler_init_temp(sp.temperature))
    add(C.llama_sampler_init_dist(sp.seed & 0xFFFFFFFF))
    return chain
