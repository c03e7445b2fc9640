"""Architecture-specific knowledge: which layers use sliding-window attention (SWA).

A GGUF file does not always say which layers use the sliding window; llama.cpp decides it per
architecture in each model's load_arch_hparams() (vendored src/models/<arch>.cpp), mostly
through llama_model_base::load_swa_pattern(ml, n_pattern, dense_first):

- if `<arch>.attention.sliding_window_pattern` is an array, it lists the SWA layers;
- otherwise the pattern is that key as a number, or the architecture's default, and
  llama_hparams::set_swa_pattern() (src/llama-hparams.cpp) marks layer `il` as SWA when
      dense_first:  n_pattern == 0 or il % n_pattern != 0
      otherwise:    n_pattern == 0 or il % n_pattern < n_pattern - 1
  so Gemma 3's default 6 gives five SWA layers, then one global layer, repeated.

Architectures not listed here get no sliding window, as in llama.cpp (which, for example,
ignores `qwen2.attention.sliding_window`). Checked against llama.cpp in llama-cpp-python 0.3.36.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.gguf.model_info import SlidingWindow


@dataclass(frozen=True, slots=True)
class SwaRule:
    kind: str = "standard"
    default_pattern: int | None = None  # None: the file must list the layers in an array
    dense_first: bool = False
    needs_window: bool = False  # SWA only when `<arch>.attention.sliding_window` > 0
    default_window: int | None = None  # used when the key is absent
    forced_window: int | None = None  # llama.cpp overrides the key with this
    off_when_window_zero: bool = False  # llama4: an explicit window of 0 turns SWA off
    all_layers: bool = False  # set_swa_pattern(0): every layer
    only_n_layer: int | None = None  # exaone4: SWA only for the 64-layer (32B) model
    non_recurrent_layers: bool = False  # lfm2: every attention (non-recurrent) layer


SWA_RULES: dict[str, SwaRule] = {
    "gemma2": SwaRule(default_pattern=2, default_window=4096),
    "gemma3": SwaRule(default_pattern=6, needs_window=True),
    "gemma3n": SwaRule(default_pattern=5),
    "gemma4": SwaRule(),
    "gemma4-assistant": SwaRule(),
    "gemma-embedding": SwaRule(kind="symmetric", default_pattern=6),
    "cohere2": SwaRule(default_pattern=4),
    "cohere2moe": SwaRule(default_pattern=4, dense_first=True),
    "llama4": SwaRule(
        kind="chunked", default_pattern=4, forced_window=8192, off_when_window_zero=True
    ),
    "gpt-oss": SwaRule(default_pattern=2),
    "exaone4": SwaRule(default_pattern=4, default_window=4096, only_n_layer=64),
    "exaone-moe": SwaRule(default_pattern=4, default_window=128),
    "olmo2": SwaRule(default_pattern=4, needs_window=True),
    "afmoe": SwaRule(default_pattern=4, needs_window=True),
    "mellum": SwaRule(default_pattern=4, needs_window=True),
    "smallthinker": SwaRule(
        default_pattern=4, dense_first=True, needs_window=True, forced_window=4096
    ),
    "plamo3": SwaRule(default_pattern=8, needs_window=True),
    "modern-bert": SwaRule(
        kind="symmetric", default_pattern=3, dense_first=True, needs_window=True
    ),
    "laguna": SwaRule(default_pattern=4, dense_first=True, needs_window=True),
    "muse-glimmer": SwaRule(default_pattern=4),
    "granite_swa": SwaRule(),
    "step35": SwaRule(),
    "mimo2": SwaRule(),
    "maple": SwaRule(),
    "dots3note": SwaRule(),
    "spark2_5": SwaRule(),
    "deepseek4": SwaRule(all_layers=True),
    "lfm2": SwaRule(needs_window=True, non_recurrent_layers=True),
}


def pattern_layers(n_layer: int, n_pattern: int, dense_first: bool) -> tuple[bool, ...]:
    """llama_hparams::set_swa_pattern(), one bool per layer."""
    if n_pattern == 0:
        return (True,) * n_layer
    if dense_first:
        return tuple(il % n_pattern != 0 for il in range(n_layer))
    return tuple(il % n_pattern < n_pattern - 1 for il in range(n_layer))


def sliding_window(
    arch: str | None,
    n_layer: int,
    window: int | None,
    pattern: int | tuple[int | bool, ...] | None,
    kv_heads: tuple[int, ...],
) -> SlidingWindow | None:
    """Which layers of an `arch` model use SWA, given the metadata values.

    `window` is `<arch>.attention.sliding_window`, `pattern` is
    `<arch>.attention.sliding_window_pattern` (a number or a per-layer array), and `kv_heads`
    the KV head count of each layer (0 marks a recurrent layer in hybrid models).
    """
    rule = SWA_RULES.get(arch or "")
    if rule is None or n_layer <= 0:
        return None
    if rule.only_n_layer is not None and n_layer != rule.only_n_layer:
        return None
    if rule.needs_window and not window:
        return None
    if rule.off_when_window_zero and window == 0:
        return None
    size = rule.forced_window or window or rule.default_window
    if not size:
        return None

    if rule.all_layers:
        return SlidingWindow(rule.kind, size, (True,) * n_layer, f"{arch}: every layer")
    if rule.non_recurrent_layers:
        layers = tuple(kv_heads[il] > 0 for il in range(n_layer))
        return SlidingWindow(rule.kind, size, layers, f"{arch}: every attention layer")
    if isinstance(pattern, tuple):
        layers = tuple(bool(pattern[il]) if il < len(pattern) else False for il in range(n_layer))
        return SlidingWindow(rule.kind, size, layers, "per-layer array in the file")
    if pattern is not None:
        layers = pattern_layers(n_layer, pattern, rule.dense_first)
        return SlidingWindow(rule.kind, size, layers, f"pattern {pattern} from the file")
    if rule.default_pattern is None:
        return None  # the file should list the layers; llama.cpp would refuse it
    layers = pattern_layers(n_layer, rule.default_pattern, rule.dense_first)
    return SlidingWindow(
        rule.kind, size, layers, f"llama.cpp's default pattern {rule.default_pattern} for {arch}"
    )
