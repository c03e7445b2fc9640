"""Speculative decoding for a loaded model: the drafter that was asked for, or why there is none.

The drafter lives as long as the model's context (a draft model's weights and KV go with it), in
the single-sequence path of an engine that declares speculative decoding (llama.cpp; the Hearth
engine for dense models): the batched path for concurrent API requests decodes without it, and
the load says so (ModelLoaded.speculative_note). MTP runs on llama.cpp only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from engine.enums import Engine
from engine.llama.driver import Context, EngineError, Model
from engine.runtime.device_facts import layers_on_gpu
from engine.runtime.engine_api import refusal
from engine.runtime.protocol import ModelParams
from engine.runtime.speculative.draft_length import DraftLength, fixed_shape_lengths
from engine.runtime.speculative.drafter import Drafter
from engine.runtime.speculative.reply_speed import ReplySpeed

# Each reply's speed-up is against plain steps timed in that reply (reply_speed.py): a run of
# plain steps long enough to time this many warm ones opens every reply, and one more warm plain
# step is due whenever this many steps have passed without one (drafting that keeps paying never
# pauses by itself). A run costs the gain of about three steps: ~2% of a 64-step stretch at 1.5x.
PLAIN_AT_REPLY_START = 2
PLAIN_STEP_EVERY = 64
# llama.cpp builds its graph again when a decode's shape changes (a checking step's batch, then
# one token), and a stock CUDA build replays a captured CUDA graph only from the third step of
# the same shape on (one step run directly, one captured; Hearth's patch 0002 keeps a graph per
# shape, leaving the graph build: the first plain step after a check cost 1.33 steps on an 8B
# on the H100, the second 1.02). So the plain steps just after a checking step cost more than
# plain decoding's: only a plain step with this many plain steps before it is a baseline, and
# the extra time of those before it is the checking step's price.
WARM_AFTER = 2
# A CUDA build runs a batch shape it has no graph for directly, then captures its graph (the
# second call instantiates it: several plain steps on the H100 for the starter model), and
# drops a graph unused for 10 s (ggml-cuda). Those first checks of a shape are not what the
# shape costs: priced as such they priced one-draft checks at 6.6 plain steps against 1.1
# measured step after step on the H100, and drafting never started again.
GRAPH_WARMUP_CHECKS = 2
GRAPH_IDLE_S = 10.0
METHODS = ("off", "prompt_lookup", "draft_model", "mtp", "auto")
# llama.cpp on a GPU checks k + 1 tokens with its batched kernels and decodes one with its
# one-token kernels (MMVQ and the vector flash attention), which round differently: a greedy
# reply may part from plain decoding's at a near-tie (3 of 4 tasks on the H100 with the starter
# model; on the CPU the texts are the same). The Hearth engine computes every checked row as its
# decode step does (engine/hearth/verify.py), so its greedy replies are the same text.
LLAMA_GPU_CAVEAT = (
    "greedy text may differ from plain decoding: llama.cpp's GPU kernels round a check of "
    "several tokens unlike a one-token step"
)


@dataclass
class Speculation:
    drafter: Drafter
    length: DraftLength
    n_vocab: int
    # running mean of a warm plain step over the session (0: none measured yet): what checking
    # steps are priced against for the draft length; the stats line uses the reply's own
    plain_step_seconds: float = 0.0
    # whether this loop's plain steps cost what plain decoding's do (see open_speculation)
    comparable_baseline: bool = True
    # whether a checking step fills its batch up to the drafted length when the drafter
    # proposes fewer (on a GPU: a few batch shapes, each keeping its graph; fixed_shape_lengths)
    pad_drafts: bool = False
    # checks of a batch shape not priced after it was new or idle (GRAPH_WARMUP_CHECKS on a GPU)
    graph_warmup: int = 0
    # why a greedy reply may differ from plain decoding's here ("": the same tokens guaranteed)
    greedy_caveat: str = ""
    # why it is on, where the engine chose ("auto": trial.py's reason)
    why: str = ""
    reply: ReplySpeed = field(default_factory=ReplySpeed)  # the current reply's clocks
    _steps_since_plain: int = 0  # steps since the last warm plain step, in this reply
    _plain_run: int = 0  # plain steps in a row before the coming one, since the last other shape
    _warm_wanted: int = 0  # warm plain steps still to time before drafting goes on
    # (drafts, seconds, new shape, warming) of the last check, priced at the next step
    _open_check: tuple[int, float, bool, bool] | None = None
    _run_checks: int = 0  # checks in the run of checks under way (or just ended)
    _run_switch: float = 0.0  # what that run's switches have cost so far, in plain steps
    _shapes: dict = field(default_factory=dict)  # drafts -> (checks since new or idle, when)

    def reply_started(self) -> None:
        """A reply starts after its prompt: its speed-up will be against its own plain steps,
        and drafting gets its chance (no pause carried over from the last reply)."""
        self.reply = ReplySpeed()
        self._steps_since_plain, self._warm_wanted = 0, PLAIN_AT_REPLY_START
        self.length.new_reply()

    def plain_step_due(self) -> bool:
        """Whether the coming step must be plain: a run of plain steps long enough to time
        warm ones is under way (at a reply's start, and every PLAIN_STEP_EVERY steps)."""
        self._steps_since_plain += 1
        if self._steps_since_plain > PLAIN_STEP_EVERY:
            self._warm_wanted = max(self._warm_wanted, 1)
        return self._warm_wanted > 0

    def record_plain_step(self, seconds: float, tokens: int = 1) -> None:
        """A plain step took `seconds` (emitting its `tokens` included)."""
        warm = self._plain_run >= WARM_AFTER
        self._plain_run += 1
        self.length.run_length = 0
        self.reply.step(seconds, tokens, warm_plain=warm)
        if not warm:
            if self._run_checks > 0 and self.plain_step_seconds > 0:  # the switch back
                extra = max(0.0, seconds - self.plain_step_seconds)
                self._run_switch += extra / self.plain_step_seconds
            return
        self._price_open_check()
        self._close_run()
        self._steps_since_plain = 0
        self._warm_wanted = max(0, self._warm_wanted - 1)
        if self.plain_step_seconds <= 0:
            self.plain_step_seconds = seconds
        else:  # a moving mean: the cost follows the context's depth slowly
            self.plain_step_seconds = 0.8 * self.plain_step_seconds + 0.2 * seconds

    def record_checking_step(self, drafts: int, seconds: float, tokens: int = 1) -> None:
        """A step checking `drafts` drafts took `seconds` (drafting included) and emitted
        `tokens`. A check inside a run of checks is priced as it is (the draft length's steady
        cost); one that starts a run pays for the switch from plain steps, and the plain steps
        after a run pay for the switch back: both are the run's switch cost."""
        self._price_open_check()
        starts_run = not self.length.in_run
        if starts_run:
            self._close_run()
        # a check of another length than the one before builds llama.cpp's graph again: like a
        # run's first check, only its excess over a check inside a run is known (the switch)
        new_shape = starts_run or drafts != self.length.run_length
        self._run_checks += 1
        self._plain_run = 0
        now = time.monotonic()
        uses, last = self._shapes.get(drafts, (0, now))
        uses = 1 if now - last > GRAPH_IDLE_S else uses + 1
        self._shapes[drafts] = (uses, now)
        warming = uses <= self.graph_warmup  # its graph being made: not what the shape costs
        self._open_check = (drafts, seconds, new_shape, warming)
        self.length.run_length = drafts
        self.reply.step(seconds, tokens)

    def reply_ended(self) -> None:
        """The next reply starts after a prompt batch: its first plain steps are not warm, and
        what the last checks cost is known as far as it will be (the prompt's batch changes
        the graph anyway: no switch back is owed)."""
        self._price_open_check()
        self._close_run()
        self._plain_run = 0
        self.length.run_length = 0

    def reply_plain_step_seconds(self) -> float:
        """The stats line's baseline: a plain step's cost from this reply's own plain steps
        (0.0 where too few were timed, or where they are not plain decoding's)."""
        return self.reply.plain_step_seconds() if self.comparable_baseline else 0.0

    def _price_open_check(self) -> None:
        check, self._open_check = self._open_check, None
        if check is None or self.plain_step_seconds <= 0:
            return
        drafts, seconds, new_shape, warming = check
        if warming:
            return
        if new_shape:  # beyond what the same check costs inside a run: a switch
            steps = seconds / self.plain_step_seconds
            self._run_switch += max(0.0, steps - self.length.steady_cost(drafts))
        else:
            self.length.record_cost(drafts, seconds, self.plain_step_seconds)

    def _close_run(self) -> None:
        if self._run_checks > 0:
            self.length.record_run(self._run_checks, self._run_switch)
        self._run_checks, self._run_switch = 0, 0.0

    def close(self) -> None:
        self.drafter.close()


def open_speculation(params: ModelParams, model, ctx) -> tuple[Speculation | None, str]:
    """The speculation `params.speculative` asks for on this model and context, and a note for
    the person when it cannot run ("" when it runs or was not asked for). `model` and `ctx`
    are any engine's (engine_api.py); only an engine that declares speculative decoding gets
    a drafter, on its llama.cpp bindings."""
    spec = params.speculative
    if spec.method == "off":
        return None, ""
    if spec.method == "auto":
        return _automatic(params, model, ctx)
    if spec.method not in METHODS:
        return None, (
            f"Unknown speculative decoding method {spec.method!r}; use one of "
            f"{', '.join(METHODS)}. Decoding without it."
        )
    if params.n_parallel > 1:
        return None, (
            "Speculative decoding is off while several requests are decoded together "
            "(parallel requests above 1); set them to 1 to use it."
        )
    refused = refusal(model.engine, model.capabilities, "speculative")
    if refused:
        return None, refused
    if spec.method == "mtp" and model.engine != Engine.LLAMA:
        return None, (
            f"MTP drafting runs on the llama.cpp engine only, and this model is loaded on the "
            f"{model.engine.display_name}. Choose prompt lookup or a draft model, or load it "
            "with the llama.cpp engine (--engine llama)."
        )
    if model.is_recurrent():
        return None, (
            "Speculative decoding is off: this model keeps a recurrent state, from which "
            "rejected drafts cannot be removed."
        )
    try:
        drafter = _make_drafter(params, model, ctx)
    except EngineError as exc:
        return None, f"{exc} Decoding without speculation."
    max_draft = max(1, spec.max_draft)
    # The loop's plain steps sample where this context samples. Where a load without
    # speculation would sample in the graph on a GPU and this context cannot (MTP: to_llama.py),
    # its plain steps read the logits back and are slower than plain decoding's (measured on
    # the H100, docs/speculative.md), so they are no baseline for a reply's speed-up: the stats
    # line then gives none. The Hearth engine's plain steps are its plain decoding's (the same
    # captured step, sampling from the logits it hands back) whatever backend_sampling says.
    on_gpu = layers_on_gpu(params.n_gpu_layers, model.n_layers()) > 0
    samples_as_plain_decoding = (
        model.engine != Engine.LLAMA or ctx.info.backend_sampling or not params.backend_sampling
    )
    # On a GPU a checking step costs little more for a few more tokens, but a new batch size
    # costs a graph build and a CUDA graph capture (on the H100 the plain step after
    # a check cost 1.33 steps on an 8B, 2.0 on the starter model), so checks keep to a few
    # sizes and are padded up to them. On a CPU every token checked costs arithmetic: no padding.
    lengths = fixed_shape_lengths(max_draft) if on_gpu else ()
    # the checks' own preparation (the Hearth engine's CUDA graphs) at the load, so that no
    # reply pays for it: the last token and the longest draft the loop will check
    ctx.prepare_checks(max(lengths or (max_draft,)) + 1)
    return (
        Speculation(
            drafter=drafter,
            length=DraftLength(max_length=max_draft, lengths=lengths),
            n_vocab=model.n_vocab,
            comparable_baseline=samples_as_plain_decoding or not on_gpu,
            pad_drafts=on_gpu,
            graph_warmup=GRAPH_WARMUP_CHECKS if on_gpu else 0,
            greedy_caveat=greedy_caveat(model.engine, on_gpu),
        ),
        "",
    )


def _automatic(params: ModelParams, model, ctx) -> tuple[Speculation | None, str]:
    """ "auto": prompt lookup where the engine's own trial on this model says checks pay
    (trial.py), with the reason; else none, and the reason as the note. Only the Hearth engine
    chooses for itself: llama.cpp's checks gained 0.97-1.11x on the H100 and round unlike its
    one-token steps on a GPU (docs/speculative.md), so there it runs when asked by name."""
    from engine.runtime.speculative import trial

    if model.engine != Engine.HEARTH or not model.capabilities.speculative:
        return None, ""
    if params.n_parallel > 1:
        return None, ""
    key = trial.trial_key(params.path, model.engine, model.description(), params.type_k,
                          params.type_v)  # fmt: skip
    result = trial.remembered(key)
    if result is None:
        prompt = model.tokenize(trial.TRIAL_TEXT, add_special=True)
        room = max(2, min(len(prompt), ctx.info.n_ctx - 2 * (trial.TRIAL_DRAFTS + 8)))
        result = trial.measure(ctx, prompt[:room])
        trial.remember(key, result)
    if not result.pays:
        return None, f"Speculative decoding {result.reason()}."
    lookup = replace(params.speculative, method="prompt_lookup")
    speculation, note = open_speculation(replace(params, speculative=lookup), model, ctx)
    if speculation is not None:
        speculation.why = result.reason()
    return speculation, note


def greedy_caveat(engine: Engine, on_gpu: bool) -> str:
    """Why greedy speculation may not give plain decoding's text on this engine and device
    ("" where it does: llama.cpp on the CPU, the Hearth engine everywhere)."""
    return LLAMA_GPU_CAVEAT if engine == Engine.LLAMA and on_gpu else ""


def _make_drafter(params: ModelParams, model: Model, ctx: Context) -> Drafter:
    method = params.speculative.method
    if method == "prompt_lookup":
        from engine.runtime.speculative.prompt_lookup import PromptLookup

        return PromptLookup()
    if method == "draft_model":
        from engine.runtime.speculative.draft_model import DraftModel

        return DraftModel.open(params, model)
    from engine.runtime.speculative.mtp import MtpDrafter
    from engine.runtime.to_llama import context_settings

    return MtpDrafter(model, ctx, context_settings(params))
