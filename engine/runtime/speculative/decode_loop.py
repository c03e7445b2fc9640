"""The speculative decode loop: draft, check every draft in one step of the engine, keep the run
the model agrees with, drop the rest from the KV cache.

It drives any engine that declares speculative decoding through the seam (engine_api.py):
`ctx.step(token)` for a plain step, `ctx.check(tokens, position)` for a checking step (one
output per row), `ctx.forget_from` for the rejected rows. llama.cpp checks in one llama_decode
with logits at every row; the Hearth engine in one forward whose every row is computed as its
decode step computes it (engine/hearth/verify.py), so its greedy replies are the same text.

Each step decodes the last sampled token followed by the drafts, with logits for every position.
Position i's logits give the token the model chooses after the drafts before it; drafts are
taken while the model's choice equals them, and the first choice that differs (or, when all are
taken, the choice after the last draft) is the next sampled token - exactly the token plain
decoding would have produced there, drawn by the same sampler chain in the same order, so greedy
and seeded replies are the same text token for token (acceptance.py: why the distribution is
kept). Tokens reach the reply through ReplyTokens.take one at a time, as in plain decoding: stop
strings, end of generation, stop requests and max_tokens act at the same token.

Where plain decoding samples in the graph (llama.cpp's backend sampling), so does this loop: its
plain steps are plain decoding's steps, and a checking step has every row's token drawn on the
device (the argmax when greedy) so that only token ids come back, never a row of logits.
llama.cpp draws each row's random number from a copy of the chain's generator and advances the
generator only for the tokens accepted (`llama_sampler_sample` accepts, rows in order), so a
seeded reply uses the same draws as plain decoding.

The KV cache is kept as plain decoding would leave it: rejected drafts are removed at once, and
when the reply ends in the middle of a step, the tokens after the last emitted one too.
"""

from __future__ import annotations

import time

import numpy as np

from engine.enums import StopReason
from engine.llama.driver import EngineError
from engine.runtime.engine_api import Sampler, StepOutput
from engine.runtime.reply_tokens import ReplyTokens
from engine.runtime.speculative.setup import Speculation


class SpeculativeLoop:
    def __init__(
        self,
        session,
        sampler: Sampler,
        reply: ReplyTokens,
        prompt,
        *,
        greedy: bool,
        first: StepOutput,
    ):
        """`session`: engine.runtime.generation.Session on an engine that declares speculative
        decoding, with `speculation` set; `first`: the prompt's last output."""
        self.session, self.sampler, self.reply = session, sampler, reply
        self.first = first
        self.spec: Speculation = session.speculation
        self.greedy = greedy  # plain argmax: read the logits, skip the sampler chain
        self.history = list(prompt)  # prompt + every token emitted, for the drafter
        self.n_drafted = self.n_accepted = 0
        self.spec.drafter.begin(self.history)
        self.spec.reply_started()

    def run(self) -> str:
        try:
            return self._steps()
        finally:
            self.spec.reply_ended()
            self.reply.finish()

    def figures(self) -> dict:
        """GenerationStats' speculative fields for this reply."""
        return {
            "speculative": self.spec.drafter.name,
            "n_drafted": self.n_drafted,
            "n_draft_accepted": self.n_accepted,
            # the baseline: plain steps timed in this reply (reply_speed.py); none where too
            # few were, or where the loop's plain steps are not plain decoding's (setup.py)
            "plain_step_seconds": self.spec.reply_plain_step_seconds(),
            "speculative_caveat": self.spec.greedy_caveat if self.greedy else "",
            "speculative_why": self.spec.why,
        }

    def _steps(self) -> str:
        reply, session, spec = self.reply, self.session, self.spec
        n_ctx = session.ctx.info.n_ctx
        if reply.max_tokens <= 0:
            return StopReason.MAX_TOKENS
        pending = self._choice(self.first)  # from the prefill's last output
        while True:
            # Steps are timed from here: a plain step's price includes emitting its token, as
            # in plain decoding, and a checking step's includes drafting.
            started, emitted = time.perf_counter(), reply.n_generated
            reason = reply.take(pending)
            if reason is not None:
                return reason
            if len(session.cached) + 1 >= n_ctx:
                return StopReason.CONTEXT_FULL
            self.history.append(pending)
            # Drafts beyond the reply's end or the context's are never worth checking.
            room = min(reply.max_tokens - reply.n_generated - 1, n_ctx - 2 - len(session.cached))
            wanted = 0 if spec.plain_step_due() else min(spec.length.next_length(), room)
            drafts = spec.drafter.propose(self.history, wanted)[:wanted] if wanted > 0 else []
            proposed = len(drafts)
            if proposed:
                spec.length.proposed()
            elif spec.pad_drafts and wanted > 0 and spec.length.pad_empty_check(wanted):
                # Nothing to propose, yet a check of padding keeps the run's batch shape for
                # less than leaving the run would cost (draft_length.py).
                drafts = [pending]
            if not drafts:
                pending = self._plain_step(pending)
                spec.record_plain_step(time.perf_counter() - started, reply.n_generated - emitted)
                continue
            if spec.pad_drafts and len(drafts) < wanted:
                # The batch keeps the drafted length's shape (setup.py: on a GPU a new shape
                # costs more than the padding). The padding is checked like any draft: the
                # model's own choices decide what is kept, so the text cannot change.
                drafts = drafts + [drafts[-1]] * (wanted - len(drafts))
            pending, reason = self._checked_step(pending, drafts, proposed)
            if reason is not None:
                return reason
            # What drafting and checking cost against a plain step (a draft model's own
            # decodes are part of the price, and so is going back to plain steps after it).
            spec.record_checking_step(
                len(drafts), time.perf_counter() - started, reply.n_generated - emitted
            )

    def _plain_step(self, token: int) -> int:
        """Decode one token as plain decoding does (timed by the caller: the speed-up's
        baseline)."""
        position = len(self.session.cached)
        out = self.session.ctx.step(token)
        self.session.cached.append(token)
        self.spec.drafter.decoded([token], position)
        return self._choice(out)

    def _checked_step(self, token: int, drafts: list[int], proposed: int) -> tuple[int, str | None]:
        """Decode `token` and the drafts in one step; emit the drafts the model agrees with.
        The first `proposed` drafts are the drafter's, the rest padding: the acceptance rate
        is the drafter's own. An engine may check fewer rows than asked (ctx.check): the
        drafts past them count as not kept. Returns the next sampled token, and the stop
        reason if the reply ended here."""
        session, reply, ctx = self.session, self.reply, self.session.ctx
        n_ctx = ctx.info.n_ctx
        position = len(session.cached)
        outs = ctx.check([token, *drafts], position)
        checked = drafts[: len(outs) - 1]
        proposed = min(proposed, len(checked))
        session.cached.append(token)
        self.n_drafted += proposed
        accepted, reason, chosen = 0, None, -1
        for row, draft in enumerate(checked):
            chosen = self._choice(outs[row])
            if chosen != draft:
                break
            accepted += 1
            reason = reply.take(chosen)
            if reason is None and len(session.cached) + 1 >= n_ctx:
                reason = StopReason.CONTEXT_FULL
            if reason is not None:
                break
            self.history.append(chosen)
            session.cached.append(chosen)
        else:
            chosen = self._choice(outs[len(checked)])
        self.n_accepted += min(accepted, proposed)
        self.spec.length.record(proposed, min(accepted, proposed))
        if len(session.cached) < position + len(outs):
            self._forget_after_cached()
        self.spec.drafter.decoded(session.cached[position:], position)  # what the cache kept
        return chosen, reason

    def _forget_after_cached(self) -> None:
        session = self.session
        if not session.ctx.forget_from(len(session.cached)):
            raise EngineError(
                "This model's cache cannot drop rejected draft tokens (a recurrent model). "
                "Turn speculative decoding off on the Model page and load it again."
            )

    def _choice(self, out: StepOutput) -> int:
        """The token the model picks at a step's output. With the sampler in the graph every
        row's token was drawn there, as plain decoding's is, and only token ids come back;
        greedy over logits the engine keeps (llama.cpp's row), the row's logits are read here;
        otherwise the sampler picks from the output, as in plain decoding (the Hearth engine's
        hands back its logits and argmax)."""
        if self.greedy and out.logits is None and not self.sampler.in_graph:
            logits = self.session.ctx.logits_at(out.row)
            return int(np.ctypeslib.as_array(logits, shape=(self.spec.n_vocab,)).argmax())
        return self.sampler.sample(out)
