"""llama.cpp's MTP (multi-token prediction) context, through public C calls only.

A model whose GGUF carries NextN layers, loaded with `load_mtp`, can run them in a second
context of type LLAMA_CONTEXT_TYPE_MTP. Each of its rows takes a token and the main model's
hidden state for the position before it (`llama_batch_ext_set_embd_token`), attends over its own
KV cache and returns logits for the token after. llama.cpp's own driver
(common/speculative.cpp, common_speculative_impl_draft_mtp) reads the hidden states with
`llama_get_embeddings_nextn(_ith)`, which live in the staging C++ header src/llama-ext.h and are
exported only under mangled names. Hearth reads the same rows through public calls instead:

- the main model's: `llama_get_embeddings_ith` with embeddings on. In the trunk graphs of the
  MTP architectures the NextN row is the output-normed hidden state, the very tensor
  (`res->t_h_nextn`, `res->t_embd`) that call returns (checked bit for bit against llama.cpp's
  own call in tests/engine/llama/test_mtp.py);
- the MTP layer's own (the input of the next drafted token): not reachable through llama.h: the
  MTP graphs set no `t_embd`, and asking an MTP context for embeddings aborts the process
  ("missing result_norm/result_embd tensor"). It is read where the graph computes it, with the
  scheduler's evaluation callback (`cb_eval`, llama_context_params) and ggml's public
  `ggml_get_name` / `ggml_backend_tensor_get`, from the tensor every MTP graph names "h_nextn".
  That name is llama.cpp's choice, not an API: when it changes, `last_hidden()` returns None
  and drafting stops after one token per step (slower, still exact).
"""

from __future__ import annotations

import ctypes
import os
import re

import llama_cpp as C
import numpy as np
from llama_cpp import llama_cpp as _binding

from engine.gguf import GGUFError, read_model_info
from engine.hardware.cpu_probe import llama_threads
from engine.llama.driver import Context, EngineError, Model, decode_failure
from engine.llama.params import ContextSettings

HIDDEN_TENSOR = b"h_nextn"  # the name every DECODER_MTP graph gives its hidden output
SPLIT_NAME = re.compile(r"(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")  # llama.cpp's


def _ggml_base():
    """ggml's own library beside libllama (its public C API: tensor names and reads), or None
    when it cannot be opened (drafting then makes one draft a step)."""
    llama = _binding._lib._name  # libllama.so / libllama.dylib / llama.dll
    name = os.path.basename(llama).replace("llama", "ggml-base", 1)
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(llama), name))
    except OSError:
        return None
    lib.ggml_get_name.argtypes = [ctypes.c_void_p]
    lib.ggml_get_name.restype = ctypes.c_char_p
    lib.ggml_nbytes.argtypes = [ctypes.c_void_p]
    lib.ggml_nbytes.restype = ctypes.c_size_t
    lib.ggml_backend_tensor_get.argtypes = [
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t
    ]  # fmt: skip
    lib.ggml_backend_tensor_get.restype = None
    return lib


def keep_hidden_states(ctx: Context, on: bool = True) -> None:
    """Make every decode of `ctx` keep each token's hidden state (and logits for every token:
    llama.cpp outputs all rows while embeddings are on, so the context needs n_outputs_max of
    a whole batch)."""
    C.llama_set_embeddings(ctx.handle, on)


def hidden_state(ctx: Context, row: int, n_embd: int) -> np.ndarray:
    """The hidden state of batch row `row` of the last decode (a copy)."""
    pointer = C.llama_get_embeddings_ith(ctx.handle, row)
    if not pointer:
        raise EngineError(
            "llama.cpp kept no hidden state for this token; turn MTP drafting off and load "
            "the model again."
        )
    return np.ctypeslib.as_array(pointer, shape=(n_embd,)).copy()


def has_mtp_weights(path: str) -> bool:
    """Whether the GGUF (all its parts, when split) holds the last block's NextN projection:
    llama.cpp's own test (common/speculative.cpp). A file can declare NextN layers whose
    weights its conversion left out; llama.cpp then loads it, and aborts the process when an
    MTP context is made."""
    info = read_model_info(path)
    wanted = f"blk.{(info.block_count or 0) - 1}.nextn.eh_proj.weight"
    paths = [path]
    match = SPLIT_NAME.match(os.path.basename(path))
    if info.is_split and match:
        n = int(match["count"])
        folder = os.path.dirname(path)
        paths = [
            os.path.join(folder, f"{match['stem']}-{i:05d}-of-{n:05d}.gguf")
            for i in range(1, n + 1)
        ]
    for part in paths:
        names = {t.name for t in (info if part == path else read_model_info(part)).tensors}
        if wanted in names:
            return True
    return False


class MtpContext:
    """The MTP layer's context: its KV cache follows the main context's, one position each."""

    def __init__(self, model: Model, settings: ContextSettings):
        if model.n_mtp_layers() == 0:
            raise EngineError("This model has no MTP layers to draft with.")
        try:
            present = has_mtp_weights(model.params.path)
        except (GGUFError, OSError) as exc:
            raise EngineError(
                f"The model file could not be read again to find its MTP weights ({exc})."
            ) from exc
        if not present:
            raise EngineError(
                "This file declares MTP layers but does not carry their weights (its conversion "
                "left them out); choose prompt lookup or a draft model, or a GGUF with the MTP "
                "layers."
            )
        self.model = model
        self.n_embd = C.llama_model_n_embd(model.handle)
        self._ggml = _ggml_base()
        self._hidden: np.ndarray | None = None
        self._callback = _binding.ggml_backend_sched_eval_callback(self._on_tensor)
        cp = C.llama_context_default_params()
        cp.ctx_type = C.LLAMA_CONTEXT_TYPE_MTP
        cp.n_ctx = settings.n_ctx
        cp.n_batch = min(settings.n_batch, settings.n_ctx)
        cp.n_ubatch = min(settings.n_ubatch, cp.n_batch)
        cp.n_threads, cp.n_threads_batch = llama_threads(settings.n_threads)
        cp.no_perf = True
        if self._ggml is not None:
            cp.cb_eval = self._callback
        handle = C.llama_init_from_model(model.handle, cp)
        if not handle:
            raise EngineError(
                "llama.cpp could not create the MTP context (its KV cache and compute buffers); "
                "there is probably not enough memory: try a shorter context."
            )
        self._handle = handle
        self.n_batch = C.llama_n_batch(handle)
        self._memory = C.llama_get_memory(handle)
        self._batch = C.llama_batch_ext_init(handle)
        self._pos = (C.llama_pos * 1)()

    def _on_tensor(self, tensor, ask, _user_data) -> bool:
        """The scheduler asks, node by node, whether we want to see a tensor (ask), then
        shows the ones we wanted once computed. Only the MTP layer's hidden output is kept."""
        if self._ggml.ggml_get_name(tensor) != HIDDEN_TENSOR:
            return not ask
        if ask:
            return True
        n_bytes = self._ggml.ggml_nbytes(tensor)
        rows = np.empty(n_bytes // 4, dtype=np.float32)
        self._ggml.ggml_backend_tensor_get(tensor, rows.ctypes.data, 0, n_bytes)
        self._hidden = rows.reshape(-1, self.n_embd)
        return True

    def feed(self, tokens: list[int], position: int, hidden: np.ndarray, *, logits: bool) -> None:
        """Run the MTP layer over `tokens` from `position`, token i paired with hidden row i
        (the main model's state at the position before it); logits for the last when asked."""
        hidden = np.ascontiguousarray(hidden, dtype=np.float32)
        batch = self._batch
        self._hidden = None
        C.llama_batch_ext_clear(batch)
        for i, token in enumerate(tokens):
            index = C.llama_batch_ext_add_token(batch, 0, token)
            self._pos[0] = position + i
            row = C.llama_embd(
                hidden[i].ctypes.data_as(ctypes.POINTER(ctypes.c_float)), 1, self.n_embd
            )
            if (
                index < 0
                or not C.llama_batch_ext_set_pos(batch, index, self._pos)
                or not C.llama_batch_ext_set_embd_token(batch, index, row)
            ):
                raise EngineError("llama.cpp refused an MTP batch entry; turn MTP drafting off.")
            C.llama_batch_ext_set_output_logits(batch, index, logits and i == len(tokens) - 1)
        rc = C.llama_process(self.handle, C.LLAMA_PROCESS_TYPE_DECODE, batch)
        if rc != 0:
            raise EngineError(decode_failure(rc))

    def logits_of_last(self) -> np.ndarray:
        """The logits the last `feed(..., logits=True)` asked for (a view, valid until the
        next feed)."""
        pointer = C.llama_get_logits_ith(self.handle, -1)
        return np.ctypeslib.as_array(pointer, shape=(self.model.n_vocab,))

    def last_hidden(self) -> np.ndarray | None:
        """The MTP layer's hidden state for the last token fed (the next draft's input), or
        None when the graph did not show it (see the module's note)."""
        return None if self._hidden is None else self._hidden[-1]

    def forget_from(self, position: int) -> None:
        C.llama_memory_seq_rm(self._memory, 0, position, -1)

    @property
    def handle(self):
        if self._handle is None:
            raise EngineError("The MTP context was freed.")
        return self._handle

    def close(self) -> None:
        if self._handle is not None:
            C.llama_batch_ext_free(self._batch)
            C.llama_free(self._handle)
            self._handle = None
