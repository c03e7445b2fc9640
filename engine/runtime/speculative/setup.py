"""Speculative decoding for a loaded model: the drafter that was asked for, or why there is none.

The drafter lives as long as the model's context (a draft model's weights and KV go with it), in
the single-sequence llama.cpp path only: the batched path for concurrent API requests and the
Hearth engine decode without speculation, and the load says so (ModelLoaded.speculative_note).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.llama.batch import SequenceBatch
from engine.llama.driver import Context, EngineError, Model
from engine.runtime.device_facts import layers_on_gpu
from engine.runtime.protocol import ModelParams
from engine.runtime.speculative.draft_length import DraftLength
from engine.runtime.speculative.drafter import Drafter

# A plain step is timed at least this often (in steps), so that each reply's speed-up is
# measured against plain decoding in the same session, not guessed.
PLAIN_STEP_EVERY = 64
METHODS = ("off", "prompt_lookup", "draft_model", "mtp")


@dataclass
class Speculation:
    drafter: Drafter
    length: DraftLength
    batch: SequenceBatch  # the checking step's batch: the last token and the drafts
    n_vocab: int
    plain_step_seconds: float = 0.0  # running mean of a plain step (0: none measured yet)
    # whether this loop's plain steps cost what plain decoding's do (see open_speculation)
    comparable_baseline: bool = True
    _steps_since_plain: int = field(default=PLAIN_STEP_EVERY)

    def plain_step_due(self) -> bool:
        self._steps_since_plain += 1
        return self._steps_since_plain > PLAIN_STEP_EVERY

    def record_plain_step(self, seconds: float) -> None:
        self._steps_since_plain = 0
        if self.plain_step_seconds <= 0:
            self.plain_step_seconds = seconds
        else:  # a moving mean: the cost follows the context's depth slowly
            self.plain_step_seconds = 0.8 * self.plain_step_seconds + 0.2 * seconds

    def close(self) -> None:
        self.drafter.close()
        self.batch.close()


def open_speculation(
    params: ModelParams, model: Model, ctx: Context
) -> tuple[Speculation | None, str]:
    """The speculation `params.speculative` asks for on this model and context, and a note for
    the person when it cannot run ("" when it runs or was not asked for)."""
    spec = params.speculative
    if spec.method == "off":
        return None, ""
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
    if not isinstance(ctx, Context):  # the Hearth engine's context (its model is vocab-only)
        return None, (
            "Speculative decoding runs on the llama.cpp engine only; choose that engine to use it."
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
    # With speculation every step reads its logits back and samples on the CPU, where plain
    # decoding on a GPU samples in the graph and reads one token id. There the loop's own plain
    # steps are slower than plain decoding (the starter model on the H100: the stats line said
    # 1.32x for a reply measured at 0.54x, docs/speculative.md), so they are no baseline for
    # a reply's speed-up: the stats line then gives none.
    on_gpu = layers_on_gpu(params.n_gpu_layers, model.n_layers()) > 0
    return (
        Speculation(
            drafter=drafter,
            length=DraftLength(max_length=max_draft),
            batch=SequenceBatch(max_draft + 1),
            n_vocab=model.n_vocab,
            comparable_baseline=not (params.backend_sampling and on_gpu),
        ),
        "",
    )


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
