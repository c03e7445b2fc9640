"""Owning wrappers over llama.cpp's C API (through llama-cpp-python's ctypes bindings).

Each wrapper owns one C handle and frees it in `close()`, deterministically: a model's device
memory is returned when the next model is loaded, not whenever the garbage collector runs. The C
prototype of each call is in llama.h; the bindings in `llama_cpp.llama_cpp` mirror it.

Only the engine worker process imports this module. Its settings are its own types
(engine/llama/params.py); the runtime translates the wire protocol into them.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

import llama_cpp.llama_cpp as C

from engine.enums import KVType
from engine.hardware.cpu_probe import llama_threads
from engine.llama.params import ContextSettings, ModelSettings

# The planner's types (engine.enums.KVType) as ggml types; f32 is here for measuring rounding
# (benchmarks/backends/cuda_error_sources.py), at twice f16's memory.
KV_TYPES = {
    KVType.F16: C.GGML_TYPE_F16,
    KVType.Q8_0: C.GGML_TYPE_Q8_0,
    KVType.Q4_0: C.GGML_TYPE_Q4_0,
    "f32": C.GGML_TYPE_F32,
}
FLASH_ATTN = {
    "auto": C.LLAMA_FLASH_ATTN_TYPE_AUTO,
    "on": C.LLAMA_FLASH_ATTN_TYPE_ENABLED,
    "off": C.LLAMA_FLASH_ATTN_TYPE_DISABLED,
}


class EngineError(Exception):
    """A failure the user can act on; the message says what happened and what to do."""


_backend_ready = False


def init_backend() -> None:
    """Load llama.cpp's backends once per process (CUDA, Metal, ... and the CPU)."""
    global _backend_ready
    if not _backend_ready:
        C.llama_backend_init()
        _backend_ready = True


def system_info() -> str:
    return C.llama_print_system_info().decode("utf-8", "replace")


def supports_gpu_offload() -> bool:
    """Layers can go on a GPU of this machine (helper machines' GPUs are not counted)."""
    from engine.llama.devices import local_gpu_offload

    return local_gpu_offload()


class Model:
    """A loaded model (weights on the devices llama.cpp chose for them). With
    `ModelSettings.vocab_only`, only the vocabulary and metadata: the Hearth engine's tokenizer
    and chat template."""

    def __init__(self, params: ModelSettings):
        init_backend()
        if not os.path.isfile(params.path):
            raise EngineError(f"No model file at {params.path}. Choose another file.")
        mp = C.llama_model_default_params()
        mp.n_gpu_layers = params.n_gpu_layers if params.n_gpu_layers >= 0 else 2**31 - 1
        mp.vocab_only = params.vocab_only
        mp.load_mtp = params.load_mtp  # without it llama.cpp skips the NextN tensors
        keep_alive = _apply_placement(mp, params)  # C arrays llama.cpp reads during the load
        if not params.use_mmap:
            # This llama.cpp has no use_mmap field (a ctypes Structure would take the assignment
            # silently as a Python attribute): the load mode says it.
            mp.load_mode = C.LLAMA_LOAD_MODE_NONE
        handle = C.llama_model_load_from_file(os.fsencode(params.path), mp)
        del keep_alive
        if not handle:
            raise EngineError(
                f"llama.cpp could not load {os.path.basename(params.path)}. The file may be "
                "damaged, or use an architecture this engine version does not know; the "
                "engine's last lines say more."
            )
        self._handle = handle
        self.vocab = C.llama_model_get_vocab(handle)
        self.n_vocab = C.llama_vocab_n_tokens(self.vocab)
        self.params = params
        self._piece_buf = ctypes.create_string_buffer(256)
        self._special_texts: tuple[str, ...] | None = None

    @property
    def handle(self):
        if self._handle is None:
            raise EngineError("The model was unloaded.")
        return self._handle

    def close(self) -> None:
        if self._handle is not None:
            C.llama_model_free(self._handle)
            self._handle = None

    # -- facts about the model --------------------------------------------------------------

    def description(self) -> str:
        buf = ctypes.create_string_buffer(256)
        C.llama_model_desc(self.handle, buf, len(buf))
        return buf.value.decode("utf-8", "replace")

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(1024)
        n = C.llama_model_meta_val_str(self.handle, key.encode(), buf, len(buf))
        if n < 0:
            return None
        if n >= len(buf):
            buf = ctypes.create_string_buffer(n + 1)
            C.llama_model_meta_val_str(self.handle, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", "replace")

    def chat_template(self) -> str | None:
        raw = C.llama_model_chat_template(self.handle, None)
        return raw.decode("utf-8", "replace") if raw else None

    def n_swa(self) -> int:
        """The sliding window of the model's windowed layers (0: none)."""
        return C.llama_model_n_swa(self.handle)

    def n_ctx_train(self) -> int:
        return C.llama_model_n_ctx_train(self.handle)

    def n_layers(self) -> int:
        return C.llama_model_n_layer(self.handle)

    def n_params(self) -> int:
        return C.llama_model_n_params(self.handle)

    def size_bytes(self) -> int:
        return C.llama_model_size(self.handle)

    def n_mtp_layers(self) -> int:
        """Multi-token-prediction (NextN) layers the file carries (0: none)."""
        return C.llama_model_n_layer_nextn(self.handle)

    def is_recurrent(self) -> bool:
        """A recurrent or hybrid model (Mamba, RWKV, Qwen3-Next, ...): its state cannot drop
        a tail of tokens (llama_memory_seq_rm fails)."""
        h = self.handle
        return bool(C.llama_model_is_recurrent(h) or C.llama_model_is_hybrid(h))

    def vocab_type(self) -> int:
        """The tokenizer's kind (llama_vocab_type: SPM, BPE, WPM, ...)."""
        return C.llama_vocab_type(self.vocab)

    def token_source_text(self, token: int) -> bytes:
        """The token's text as the vocabulary stores it (before any detokenizing)."""
        return C.llama_vocab_get_text(self.vocab, token) or b""

    def special_tokens(self) -> tuple[int, ...]:
        """BOS, EOS, EOT, PAD: what two vocabularies must agree on to share drafts."""
        v = self.vocab
        return tuple(
            f(v)
            for f in (C.llama_vocab_bos, C.llama_vocab_eos, C.llama_vocab_eot, C.llama_vocab_pad)
        )

    def special_token_texts(self) -> tuple[str, ...]:
        """The texts that become one control or user-defined token when special tokens are
        parsed (`<|im_start|>` and the like); read from the vocabulary once."""
        if getattr(self, "_special_texts", None) is None:
            wanted = C.LLAMA_TOKEN_ATTR_CONTROL | C.LLAMA_TOKEN_ATTR_USER_DEFINED
            self._special_texts = tuple(
                self.token_source_text(t).decode("utf-8", "replace")
                for t in range(self.n_vocab)
                if C.llama_vocab_get_attr(self.vocab, t) & wanted
            )
        return self._special_texts

    def token_text(self, token: int) -> str:
        return self.token_bytes(token, special=True).decode("utf-8", "replace")

    def bos_text(self) -> str:
        bos = C.llama_vocab_bos(self.vocab)
        return self.token_text(bos) if bos != C.LLAMA_TOKEN_NULL else ""

    def eos_text(self) -> str:
        eos = C.llama_vocab_eos(self.vocab)
        return self.token_text(eos) if eos != C.LLAMA_TOKEN_NULL else ""

    # -- tokens -------------------------------------------------------------------------------

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool = True) -> list[int]:
        data = text.encode("utf-8", "replace")  # a lone surrogate must not fail the turn
        capacity = len(data) + 8
        tokens = (C.llama_token * capacity)()
        n = C.llama_tokenize(
            self.vocab, data, len(data), tokens, capacity, add_special, parse_special
        )
        if n < 0:  # the buffer was too small: -n is the size needed
            capacity = -n
            tokens = (C.llama_token * capacity)()
            n = C.llama_tokenize(
                self.vocab, data, len(data), tokens, capacity, add_special, parse_special
            )
        if n < 0:
            raise EngineError("The prompt could not be tokenized.")
        return list(tokens[:n])

    def token_bytes(self, token: int, *, special: bool = False) -> bytes:
        buf = self._piece_buf
        n = C.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        if n < 0:
            bigger = ctypes.create_string_buffer(-n)
            n = C.llama_token_to_piece(self.vocab, token, bigger, len(bigger), 0, special)
            return bigger.raw[:n]
        return buf.raw[:n]

    def is_end_of_generation(self, token: int) -> bool:
        return bool(C.llama_vocab_is_eog(self.vocab, token))

    def adds_bos(self) -> bool:
        return bool(C.llama_vocab_get_add_bos(self.vocab))

    def is_reranker(self) -> bool:
        """A model whose pooled output is a relevance score (pooling type "rank")."""
        pooling = self.meta(f"{self.meta('general.architecture')}.pooling_type")
        return pooling == str(C.LLAMA_POOLING_TYPE_RANK)

    def rerank_tokens(self, query: str, document: str) -> list[int]:
        """A reranker's input for one (query, document) pair, as llama-server builds it: the
        model's own rerank template with {query} and {document} filled in when it has one
        (Qwen3-Reranker's), else [BOS] query [EOS] [SEP] document [EOS], each special token
        where the vocabulary asks for it (EOS falls back to SEP for vocabularies without one)."""
        template = C.llama_model_chat_template(self.handle, b"rerank")
        if template:
            prompt = template.decode("utf-8", "replace")
            prompt = prompt.replace("{query}", query).replace("{document}", document)
            return self.tokenize(prompt, add_special=False, parse_special=True)
        v = self.vocab
        eos = C.llama_vocab_eos(v)
        if eos == C.LLAMA_TOKEN_NULL:
            eos = C.llama_vocab_sep(v)
        bos = [C.llama_vocab_bos(v)] if C.llama_vocab_get_add_bos(v) else []
        end = [eos] if C.llama_vocab_get_add_eos(v) else []
        sep = [C.llama_vocab_sep(v)] if C.llama_vocab_get_add_sep(v) else []
        words = self.tokenize(query, add_special=False, parse_special=False)
        doc = self.tokenize(document, add_special=False, parse_special=False)
        return [*bos, *words, *end, *sep, *doc, *end]


@dataclass(frozen=True)
class ContextInfo:
    n_ctx: int
    n_batch: int
    flash_attn: str
    backend_sampling: bool
    swa_full: bool
    n_outputs_max: int = 1  # rows of logits (and hidden states) one decode may return


class Context:
    """A llama.cpp context: the KV cache and compute buffers for one conversation."""

    def __init__(self, model: Model, params: ContextSettings):
        cp = C.llama_context_default_params()
        cp.n_ctx = params.n_ctx
        cp.n_batch = min(params.n_batch, params.n_ctx)
        cp.n_ubatch = min(params.n_ubatch, cp.n_batch)
        cp.n_threads, cp.n_threads_batch = llama_threads(params.n_threads)
        cp.flash_attn_type = FLASH_ATTN[params.flash_attn]
        try:
            cp.type_k = KV_TYPES[params.type_k]
            cp.type_v = KV_TYPES[params.type_v]
        except KeyError as exc:
            raise EngineError(
                f"Unknown KV cache type {exc.args[0]!r}; use one of {', '.join(KV_TYPES)}."
            ) from None
        cp.no_perf = True
        cp.swa_full = params.swa_full
        # Chat needs the logits of the last token of a batch only (of the drafted tokens too
        # with speculative decoding). llama.cpp otherwise reserves room for n_batch rows of
        # logits in the compute buffer (times two with sampling in the graph): 1.2 GiB of VRAM
        # for a 128k vocabulary, measured on an 8B Q4_K_M.
        cp.n_outputs_max = max(1, params.n_outputs)
        # A speculative step checks several positions of one sequence in one decode; with the
        # sampler in the graph each of those rows gets its token there (llama.cpp's default
        # allows one row a sequence, and refuses the decode otherwise).
        cp.n_outputs_max_per_seq = cp.n_outputs_max
        if params.n_parallel > 1:
            # One pool of cells for all sequences, so a prompt prefix they share can be copied
            # between them (llama_memory_seq_cp) instead of computed again; and one output row
            # per sequence in a step.
            cp.n_seq_max = params.n_parallel
            cp.kv_unified = True
            cp.n_outputs_max = params.n_parallel
            cp.n_outputs_max_per_seq = 1  # one row a sequence in a step
        if params.embeddings or model.is_reranker():
            # (A reranker's every context is one: it has no logits to decode with, and
            # llama.cpp aborts a decode that asks it for them.)
            # Every token is an output, pooled per sequence: the model's own pooling (embedding
            # models say theirs), else the mean, as llama-server does for generative models.
            cp.embeddings = True
            cp.n_ubatch = cp.n_batch  # the whole input in one ubatch (non-causal models need it)
            cp.n_outputs_max = 0
            cp.n_outputs_max_per_seq = 0  # every token of every sequence (pooled per sequence)
            pooling = model.meta(f"{model.meta('general.architecture')}.pooling_type")
            cp.pooling_type = int(pooling) if pooling else C.LLAMA_POOLING_TYPE_MEAN
        handle = C.llama_init_from_model(model.handle, cp)
        if not handle:
            raise EngineError(
                f"llama.cpp could not create a context of {params.n_ctx} tokens. There is "
                "probably not enough memory: try a shorter context, a smaller KV cache type "
                "(q8_0) or fewer GPU layers."
            )
        self._handle = handle
        self.model = model
        self.memory = C.llama_get_memory(handle)
        self._one = (C.llama_token * 1)()
        self.info = ContextInfo(
            n_ctx=C.llama_n_ctx(handle),
            n_batch=C.llama_n_batch(handle),
            flash_attn=params.flash_attn,
            backend_sampling=params.backend_sampling,
            swa_full=params.swa_full,
            n_outputs_max=cp.n_outputs_max or cp.n_batch,  # 0: a whole batch
        )

    @property
    def handle(self):
        if self._handle is None:
            raise EngineError("The context was freed.")
        return self._handle

    def close(self) -> None:
        if self._handle is not None:
            C.llama_free(self._handle)
            self._handle = None

    def state_bytes(self) -> int:
        return int(C.llama_state_get_size(self.handle))

    def clear(self) -> None:
        C.llama_memory_clear(self.memory, True)

    def first_cached_position(self) -> int:
        """The lowest position still in the cache (-1: empty). Sliding-window layers that do
        not keep the full context drop positions older than the window."""
        return C.llama_memory_seq_pos_min(self.memory, 0)

    def forget_from(self, position: int) -> bool:
        """Drop cached tokens at `position` and after; False if the cache cannot do that."""
        return bool(C.llama_memory_seq_rm(self.memory, 0, position, -1))

    def forget_sequence(self, seq: int, from_position: int = 0) -> bool:
        """Drop sequence `seq`'s cached tokens at `from_position` and after."""
        return bool(C.llama_memory_seq_rm(self.memory, seq, from_position, -1))

    def share_prefix(self, src: int, dst: int, n_tokens: int) -> None:
        """Give sequence `dst` the first `n_tokens` cached for `src`. In a unified cache the
        cells are shared, not copied: nothing is computed again and no memory is taken."""
        C.llama_memory_seq_cp(self.memory, src, dst, 0, n_tokens)

    def warm_up(self) -> None:
        """Run the model once on two tokens and forget them, as llama.cpp's own programs do
        after loading: the first real prompt then does not pay for loading kernels."""
        vocab = self.model.vocab
        tokens = [t for t in (C.llama_vocab_bos(vocab), C.llama_vocab_eos(vocab)) if t >= 0]
        if not tokens:
            tokens = [0]
        arr = (C.llama_token * len(tokens))(*tokens)
        C.llama_decode(self.handle, C.llama_batch_get_one(arr, len(tokens)))
        C.llama_synchronize(self.handle)
        self.clear()

    def synchronize(self) -> None:
        """Wait for the device: llama_decode returns once work is queued, not done."""
        C.llama_synchronize(self.handle)

    def decode(self, tokens: list[int]) -> None:
        """Run the model over `tokens` (appended after what is cached), in batches."""
        step = self.info.n_batch
        for start in range(0, len(tokens), step):
            chunk = tokens[start : start + step]
            arr = (C.llama_token * len(chunk))(*chunk)
            rc = C.llama_decode(self.handle, C.llama_batch_get_one(arr, len(chunk)))
            if rc != 0:
                raise EngineError(decode_failure(rc))

    def logits_of_last(self):
        """The logits of the last output, as a ctypes float pointer of n_vocab entries (valid
        until the next decode)."""
        return ctypes.cast(C.llama_get_logits_ith(self.handle, -1), ctypes.POINTER(ctypes.c_float))

    def embed(self, tokens: list[int]) -> list[float]:
        """The pooled embedding of `tokens` (a context made with embeddings=True), or a
        reranker's scores; the cache is cleared before and after, so inputs never see each
        other."""
        if len(tokens) > self.info.n_batch:
            raise EngineError(
                f"The input is {len(tokens)} tokens long; embeddings take at most "
                f"{self.info.n_batch}. Split it."
            )
        self.clear()
        arr = (C.llama_token * len(tokens))(*tokens)
        rc = C.llama_decode(self.handle, C.llama_batch_get_one(arr, len(tokens)))
        if rc != 0:
            self.clear()
            raise EngineError(decode_failure(rc))
        try:
            return self.pooled_output(0)
        finally:
            self.clear()

    def pooled_output(self, seq: int) -> list[float]:
        """Sequence `seq`'s pooled output of the last decode: its embedding, or a reranker's
        n_cls_out scores."""
        pointer = C.llama_get_embeddings_seq(self.handle, seq)
        if not pointer:
            raise EngineError("llama.cpp gave no pooled embedding for this model.")
        ranks = C.llama_pooling_type(self.handle) == C.LLAMA_POOLING_TYPE_RANK
        size = (C.llama_model_n_cls_out if ranks else C.llama_model_n_embd)(self.model.handle)
        return list(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float))[:size])

    def logits_at(self, index: int):
        """The logits of the output at batch position `index`, as a ctypes float pointer of
        n_vocab entries (valid until the next decode)."""
        return ctypes.cast(
            C.llama_get_logits_ith(self.handle, index), ctypes.POINTER(ctypes.c_float)
        )

    def decode_one(self, token: int) -> None:
        """Decode a single token: the hot path of generation, so no allocation per call."""
        self._one[0] = token
        rc = C.llama_decode(self.handle, C.llama_batch_get_one(self._one, 1))
        if rc != 0:
            raise EngineError(decode_failure(rc))


def decode_failure(rc: int) -> str:
    if rc == 1:
        return (
            "The context is full (no room left in the KV cache). Start a new chat or load the "
            "model with a longer context."
        )
    if rc == 2:
        return "Generation was aborted."
    return f"llama_decode failed (code {rc}); the engine's last lines say more."


class _TensorOverride(ctypes.Structure):
    # struct llama_model_tensor_buft_override {
    #     const char * pattern; ggml_backend_buffer_type_t buft; };
    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


def _apply_placement(mp, params: ModelSettings) -> list:
    """Set the tensor split and the tensors kept in RAM; return what must stay alive meanwhile."""
    keep: list = []
    if params.rpc_servers:
        from engine.llama import rpc

        # Helpers first, as llama.cpp orders RPC devices itself; the list is explicit so that
        # a helper attached for an earlier load but not in this plan stays out.
        try:
            handles = rpc.attach_servers(params.rpc_servers) + rpc.local_offload_devices()
        except (rpc.HelperRefused, rpc.RpcUnavailable) as exc:
            raise EngineError(str(exc)) from None
        arr = (ctypes.c_void_p * (len(handles) + 1))(*handles, None)
        mp.devices = ctypes.cast(arr, ctypes.c_void_p)
        keep.append(arr)
    if params.tensor_split:
        shares = list(params.tensor_split)[: C.llama_max_devices()]
        arr = (ctypes.c_float * C.llama_max_devices())(*shares)
        mp.tensor_split = arr
        keep.append(arr)
    if params.cpu_tensors:
        from engine.llama.devices import cpu_buffer_type

        cpu = cpu_buffer_type()
        patterns = [pattern.encode() for pattern in params.cpu_tensors]
        items = [_TensorOverride(pattern, cpu) for pattern in patterns]
        items.append(_TensorOverride(None, None))  # the list ends with a NULL pattern
        arr = (_TensorOverride * len(items))(*items)
        # The binding declares the field as void *.
        mp.tensor_buft_overrides = ctypes.cast(arr, ctypes.c_void_p)
        keep += [arr, patterns]
    return keep
