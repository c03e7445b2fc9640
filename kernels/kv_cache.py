"""A paged KV cache on the GPU, in any K and V formats (kv_formats.py; their planes:
kv_planes.py), with its write kernel (kv_write.py) and flash-decoding attention
(decode_attention.py, launched by decode_launch.py).

Pages of `page_size` positions come from one pool shared by the sequences; a sequence's block
table lists its pages in order. The cache keeps each sequence's block table and length on the
device, so `attend` copies nothing from the host (the table changes only when a page is added).

For a CUDA graph, `write` and `attend` also take the positions as a device tensor: then no
launch argument depends on the length (attention's grid is sized for the capacity, or for a
sliding window's span), so one captured decode step replays at every position of the pages
already grown.

The sequences' pages, lengths and block tables are kv_sequences.py's (the base class).
kivi4 keys are sealed a page at a time (kv_kivi.py): each sequence holds an open page of f16
rows per layer (K and V), from `open_pages` slots made with the cache (a sequence takes one
while it lives; their memory is `open_page_bytes`; kv_open_pages.py keeps them).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
import triton

from kernels.act_quant import QuantizedActivation
from kernels.availability import require
from kernels.decode_attention import LOG2E
from kernels.decode_launch import (
    INTERPRETER_PROGRAMS_PER_SM,
    AttentionTuning,
    fitting_programs,
    launch_decode,
    query_rows,
    sinks_in_log2,
)
from kernels.errors import UnsupportedTensor
from kernels.grouped_attention import grouped_prefill_attention
from kernels.kv_formats import KVCacheSpec, kivi_group, rotation_signs
from kernels.kv_gather import kv_gather_kernel
from kernels.kv_open_pages import KiviOpenPages
from kernels.kv_planes import allocate_planes, plane_pointers
from kernels.kv_sequences import KVSequences
from kernels.kv_tiles import FORMAT_CODES
from kernels.kv_write import StepRow, kv_write_kernel, rope_arguments
from kernels.launch import runs_assembly
from kernels.prefill_masks import chunk_mask
from kernels.rope import QKNorms
from kernels.rope_tables import Rope


def write_warps(kv_heads: int, head_dim: int) -> int:
    """Warps of a write program of kv_heads rows of head_dim (a query head's program is one row
    too): a warp per 256 values, from 1 (RoPE's launch measured one program per head of one
    warp fastest at decode, kernels/rope.py) to 4."""
    return max(1, min(4, kv_heads * head_dim // 256))


def _rows_of_heads(x: torch.Tensor) -> torch.Tensor:
    """x [rows, heads, D] as the write kernel reads it: each row's heads contiguous (a view of
    a wider product keeps its row stride), else a contiguous copy."""
    if x.stride(2) == 1 and (x.shape[1] == 1 or x.stride(1) == x.shape[2]):
        return x
    return x.contiguous()


@functools.cache
def _sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


class PagedKVCache(KVSequences):
    def __init__(self, spec: KVCacheSpec, device: object = "cuda", open_pages: int = 8) -> None:
        """open_pages: how many sequences a kivi4 K cache holds at once (each keeps its open
        page in f16; unused by the other formats)."""
        require()
        self.spec = spec
        device = torch.device(device)
        n_pages = triton.cdiv(spec.max_tokens, spec.page_size)
        kivi = spec.k_format == "kivi4"
        super().__init__(n_pages, spec.page_size, device, KiviOpenPages(spec, device, open_pages),
                         kivi)  # fmt: skip
        self._k = [
            allocate_planes(spec.k_format, self.n_pages, spec, device) for _ in range(spec.n_layers)
        ]
        self._v = [
            allocate_planes(spec.v_format, self.n_pages, spec, device) for _ in range(spec.n_layers)
        ]
        # the rotation's signs with its 1/sqrt(D) folded in (kv_tiles.rotate_rows)
        scaled = rotation_signs(spec.head_dim) / math.sqrt(spec.head_dim)
        self._signs = torch.tensor(scaled, dtype=torch.float32, device=device)
        self.tuning = AttentionTuning()

    @property
    def open_page_bytes(self) -> int:
        """Memory of the kivi4 open pages, all slots and layers (0 for other K formats)."""
        return self._open_pages.bytes

    # --- pages of the sequences (kv_sequences.py), and what kivi4 keys add ----------------
    def open_slot(self, seq: int) -> torch.Tensor:
        """seq's open page slot on the device, [1] int32 (kivi4 keys; 0 for the others): what
        a CUDA graph of a batch copies into its static slots."""
        return self._open_pages.slot_tensors[seq]

    def copy_page(self, src: int, dst: int) -> None:
        """Page src's K and V, every layer and plane, into page dst (a copy on write)."""
        for planes in (*self._k, *self._v):
            for plane in planes.values():
                plane[dst].copy_(plane[src])

    def reopen(self, seq: int, n: int) -> None:
        """kivi4 K: after keeping seq's first n positions, the page of position n - 1 becomes
        the open one again (kv_kivi.py), at every layer; the next write continues it. Other
        formats: nothing to do (attention masks by position)."""
        if not self.kivi or n == 0:
            return
        pg = (n - 1) // self.spec.page_size
        for layer in range(self.spec.n_layers):
            self._open_pages.reopen_page(
                layer, seq, self._tables[seq], pg, plane_pointers(self._k[layer]),
                plane_pointers(self._v[layer]), self._signs,
            )  # fmt: skip

    # --- kernels ---------------------------------------------------------------------------
    def write(
        self, layer: int, seq: int, start: int | torch.Tensor, k, v, rope: Rope | None = None,
        *, q: torch.Tensor | None = None, biases: tuple | None = None,
        norms: QKNorms | None = None,
    ) -> torch.Tensor | None:  # fmt: skip
        """Store k, v [n, n_kv_heads, head_dim] at positions start..start+n-1 (after grow); or,
        with `start` a device tensor of n integers, row i at position start[i] (read on the
        device: no host sync, a CUDA graph can replay it; rows past the grown pages are
        dropped, not checked). Rows may be strided views (the heads of a row contiguous).

        `rope`: K rotated on its way in. `biases` (bq, bk, bv: float32 [heads * head_dim] or
        None each) added first, `norms` each head's RMSNorm before the rotation (Qwen3's q_norm
        and k_norm). `q` [n, n_heads, head_dim] (with `rope`): the queries of the same rows,
        biased, normed and rotated in the same launch and returned, a new tensor in q's dtype
        (RoPE's launch and the write's in one, kv_write.py); None without `q`."""
        spec = self.spec
        shape = (k.shape[0], spec.n_kv_heads, spec.head_dim)
        if tuple(k.shape) != shape or tuple(v.shape) != shape:
            raise UnsupportedTensor(
                f"KV rows of shapes {tuple(k.shape)} and {tuple(v.shape)}: need {shape}"
            )
        positions = start if isinstance(start, torch.Tensor) else None
        if positions is not None and positions.numel() != shape[0]:
            raise UnsupportedTensor(f"{positions.numel()} positions for {shape[0]} KV rows")
        if positions is None and start + shape[0] > self._lengths[seq]:
            raise UnsupportedTensor(
                f"positions up to {start + shape[0]} written to a sequence of "
                f"{self._lengths[seq]}: grow it first"
            )
        q_out = self._query_out(q, shape, rope)
        if shape[0] == 0:
            return q_out
        kq, ks, km = plane_pointers(self._k[layer])
        direct = self.kivi and shape[0] == 1
        scratch_len = shape[0] + spec.page_size
        if self.kivi:  # K and V rows as f16 from the first one's page start (n > 1)
            scratch = self._open_pages.scratch_for_write(layer, start, shape)
            kq = scratch if scratch is not None else kq
        first = 0 if positions is not None else start
        position_arg = positions.reshape(-1) if positions is not None else self._signs
        self._launch_write(
            layer, q, q_out, k, v, self._tables[seq], first, position_arg, self.n_pages,
            (kq, ks, km), self._open_pages.slots[seq], scratch_len, rope, biases, norms,
            positions is not None, direct,
        )  # fmt: skip
        if self.kivi:
            self._open_pages.seal(
                layer, seq, self._tables[seq], self.n_pages, plane_pointers(self._k[layer]), first,
                position_arg, shape[0], kq, positions is not None,
            )  # fmt: skip
        return q_out

    def _query_out(self, q, shape, rope) -> torch.Tensor | None:
        """The tensor a write's rotated queries go to, in q's dtype (None without queries)."""
        if q is None:
            return None
        if rope is None or q.dim() != 3 or q.shape[0] != shape[0] or q.shape[2] != shape[2]:
            raise UnsupportedTensor(
                f"queries of shape {tuple(q.shape)} with KV rows {shape}: need "
                f"[{shape[0]}, n_heads, {shape[2]}] and a rope"
            )
        return torch.empty(q.shape, dtype=q.dtype, device=self.device)

    def _launch_write(self, layer, q, q_out, k, v, tables, first, position_arg, table_pages,
                      k_planes, slot, scratch_len, rope, biases, norms, on_device,
                      direct, slot_per_row=False) -> None:  # fmt: skip
        """kv_write_kernel over k, v (and q) [rows, heads, D]: a program per query head and,
        with queries, per KV head (side by side: a decode step's one row fills HQ + HKV
        programs), else per row's KV heads (one program a row, as the rows are many)."""
        spec = self.spec
        k, v = _rows_of_heads(k), _rows_of_heads(v)
        n_q = 0
        if q is not None:
            q = _rows_of_heads(q)
            n_q = q.shape[1]
        kv_heads = 1 if q is not None else triton.next_power_of_2(spec.n_kv_heads)
        spare = self._signs  # a pointer for the arguments a launch does not read
        rope_args, rope_flags = rope_arguments(
            n_q, spec.n_kv_heads, spec.head_dim, rope, biases, norms, self.device, spare
        )
        bq, bk, bv, q_norm, k_norm, eps, inv_freq, mscale = rope_args
        vq, vs, vm = plane_pointers(self._v[layer])
        chain = self.tuning.chains(self.device)
        grid = (k.shape[0], n_q + triton.cdiv(spec.n_kv_heads, kv_heads))
        # the Q/K/V GEMV before a step's fused write lets its dependent start early (gemv.py's
        # chained integer GEMV): this launch then waits in-kernel for it
        after_prior = {"launch_pdl": True, "WAIT_PRIOR": True} if chain and n_q else {}
        kv_write_kernel[grid](
            q if q is not None else spare, q_out if q_out is not None else spare, k, v,
            tables, first, position_arg, table_pages,
            q.stride(0) if q is not None else 0, k.stride(0), v.stride(0),
            bq, bk, bv, q_norm, k_norm, eps, self._signs, inv_freq, mscale,
            *k_planes, vq, vs, vm, *self._open_pages.of_layer(layer), slot, scratch_len,
            HQ=n_q, HKV=spec.n_kv_heads, KV_HEADS=kv_heads,
            D=spec.head_dim, LOG2D=int(math.log2(spec.head_dim)), P=spec.page_size,
            K_FMT=FORMAT_CODES[spec.k_format], V_FMT=FORMAT_CODES[spec.v_format],
            POSITIONS=on_device, **rope_flags, KIVI_DIRECT=direct, LAUNCH_DEPENDENTS=chain,
            SLOT_PER_ROW=slot_per_row, num_warps=write_warps(kv_heads, spec.head_dim),
            **after_prior,
        )  # fmt: skip

    def write_rows(
        self, layer: int, seqs: list[int], positions: torch.Tensor, k, v, tables=None,
        slots=None,
    ) -> None:  # fmt: skip
        """Row i of k, v [n, n_kv_heads, head_dim] stored at position positions[i] (a device
        tensor) of sequence seqs[i]: a batch's decode step, every row in its own sequence's
        pages, in one launch. The write kernel is the one-sequence kernel given the rows'
        block tables side by side and each position moved into its row's table (table b's
        entries start at b * n_pages), so a row can reach only its own sequence's pages; a
        position past the grown pages is dropped, as in `write`. kivi4 keys: each row into its
        sequence's open page, then each page a row filled sealed (two launches). `tables`
        [len(seqs), n_pages] and (kivi4) `slots` [len(seqs)] int32: the block tables and open
        page slots to write through in place of seqs' own (a CUDA graph's static copies of a
        batch's)."""
        spec = self.spec
        shape = (len(seqs), spec.n_kv_heads, spec.head_dim)
        if tuple(k.shape) != shape or tuple(v.shape) != shape or positions.numel() != shape[0]:
            raise UnsupportedTensor(
                f"KV rows of shapes {tuple(k.shape)} and {tuple(v.shape)} with "
                f"{positions.numel()} positions for {len(seqs)} sequences: need {shape}"
            )
        if not seqs:
            return
        if tables is None:
            tables = torch.stack([self._tables[s] for s in seqs])
        rows = torch.arange(len(seqs), device=self.device, dtype=torch.int64)
        shifted = positions.reshape(-1).to(torch.int64)
        # a negative position stays outside every table (dropped), not inside the one before
        shifted = torch.where(shifted >= 0, shifted + rows * (self.n_pages * spec.page_size), -1)
        table_pages = self.n_pages * len(seqs)
        k_planes = plane_pointers(self._k[layer])
        if not self.kivi:
            self._launch_write(
                layer, None, None, k, v, tables, 0, shifted, table_pages, k_planes, 0, 0, None,
                None, None, True, False,
            )  # fmt: skip
            return
        if slots is None:
            slots = torch.cat([self._open_pages.slot_tensors[s] for s in seqs])
        self._launch_write(
            layer, None, None, k, v, tables, 0, shifted, table_pages, k_planes, slots, 0, None,
            None, None, True, True, slot_per_row=True,
        )  # fmt: skip
        self._open_pages.seal_rows(layer, tables, shifted, table_pages, k_planes, slots)

    def attend(
        self,
        layer: int,
        q: torch.Tensor,
        seqs: list[int],
        scale: float | None = None,
        *,
        window: int = 0,
        positions: torch.Tensor | None = None,
        sinks: torch.Tensor | None = None,
        tables: torch.Tensor | None = None,
        slots: torch.Tensor | None = None,
        splits_as_one: bool = False,
        quantized: QuantizedActivation | None = None,
        step_row: StepRow | None = None,
    ):
        """q [len(seqs), n_heads, head_dim]: one query per sequence over all its positions; or
        q [len(seqs), T, n_heads, head_dim]: queries for each sequence's last T positions (draft
        verification), token t seeing positions up to its own. Returns q's shape and dtype.

        positions: a device tensor of len(seqs) * T integers, the query tokens' own positions
        (in place of the lengths: what a CUDA graph replays); each sees the stored positions up
        to its own. window > 0: only the last `window` of those (p - j < window). sinks
        [n_heads] (gpt-oss's attention sinks): one more logit per head in each softmax's
        denominator.

        tables: [len(seqs), n_pages] block tables read in place of seqs' own, with `positions`
        (a CUDA graph's static copy of a batch's tables; seqs then only size the launch); slots
        (kivi4 keys): [len(seqs)] int32 open page slots read in place of seqs' own, likewise.

        splits_as_one: every query's positions split as for a single sequence's one query, so
        each of several one-token queries (the same sequence given once per query, with its
        positions) gets the bits a lone decode step gets: a speculative check's rows
        (engine/hearth/verify.py). Otherwise the split count falls as sequences are added.

        quantized: empty buffers (act_quant.empty_quantized) of [len(seqs) * T, n_heads *
        head_dim] that the launch also fills with the output in 8 bits, for the integer GEMV
        that reads it (the attention output's matrix): no quantization launch of its own.

        step_row (a decode step: one sequence, one query, `positions` given): the step's own K
        and V row (kv_write.StepRow), written by this launch as `write` with queries writes
        it, and q the queries as the GEMV made them, biased and rotated here too
        (decode_attention.py's WRITE): the KV write's launch folded into the attention's, the
        same bits. kivi4 keys: the row goes into the open page, which seals (at its last slot)
        after the attention, where `write` seals it before: the step reads the page from its
        exact rows either way."""
        spec = self.spec
        one_token = q.dim() == 3
        q4 = q.unsqueeze(1) if one_token else q
        n_seqs, n_tokens, n_heads, d = q4.shape
        if n_seqs != len(seqs) or d != spec.head_dim or n_heads % spec.n_kv_heads:
            raise UnsupportedTensor(
                f"queries of shape {tuple(q.shape)} for {len(seqs)} sequences and "
                f"{spec.n_kv_heads} KV heads of {spec.head_dim}"
            )
        rows = n_tokens * (n_heads // spec.n_kv_heads)
        if rows > 128:
            raise UnsupportedTensor(
                f"{n_tokens} query tokens x {n_heads // spec.n_kv_heads} heads per KV head: "
                "at most 128 rows; split the queries"
            )
        if quantized is not None and d % 32:
            raise UnsupportedTensor(f"8-bit output needs heads of whole 32s, not {d}")
        if positions is not None and positions.numel() != n_seqs * n_tokens:
            raise UnsupportedTensor(
                f"{positions.numel()} positions for {n_seqs} x {n_tokens} query tokens"
            )
        lengths = [self._lengths[s] for s in seqs]
        if positions is None and min(lengths) < n_tokens:
            raise UnsupportedTensor(
                f"{n_tokens} query tokens for a sequence of {min(lengths)} positions: "
                "write their K and V first"
            )
        q, stride_qt = query_rows(q4)
        write_args, write_flags = self._step_row_arguments(step_row, q, n_seqs, positions)
        if step_row is not None and self.kivi:
            if tables is not None or slots is not None:  # the seal reads the sequence's own
                raise UnsupportedTensor(
                    "a step's row with kivi4 keys is written for the sequence's own block "
                    "table and open page: pass neither tables nor slots"
                )
            # the layer's earlier exact rows are stale
            self._open_pages.scratch_for_write(layer, positions, (1, spec.n_kv_heads, d))
        group = n_heads // spec.n_kv_heads
        # one sequence given once per query at its own positions (a speculative check): its
        # block table read by every program (stride 0); lengths and open slots are read only
        # without positions and for kivi4 keys, which keep their own copies per query
        repeated = (
            n_seqs > 1 and tables is None and positions is not None and not self.kivi
            and len(set(seqs)) == 1
        )  # fmt: skip
        stride_bt = 0 if repeated else self.n_pages
        if tables is None and n_seqs > 1 and not repeated:
            tables = torch.stack([self._tables[s] for s in seqs])
        table = tables if tables is not None else self._tables[seqs[0]]
        length_t = (
            torch.cat([self._length_tensors[s] for s in seqs])
            if n_seqs > 1 and not repeated
            else self._length_tensors[seqs[0]]
        )
        if slots is None:
            slots = (
                torch.cat([self._open_pages.slot_tensors[s] for s in seqs])
                if n_seqs > 1 and not repeated
                else self._open_pages.slot_tensors[seqs[0]]
            )
        kq, ks, km = plane_pointers(self._k[layer])
        vq, vs, vm = plane_pointers(self._v[layer])
        shared = {
            "HQ": n_heads,
            "G": group,
            "T": n_tokens,
            "G_PAD": max(16, triton.next_power_of_2(rows)),
            "D": d,
            "LOG2D": int(math.log2(d)),
        }
        warps = self.tuning.warps(spec.k_format, spec.v_format)
        consts = dict(
            HKV=spec.n_kv_heads, P=spec.page_size, K_FMT=FORMAT_CODES[spec.k_format],
            V_FMT=FORMAT_CODES[spec.v_format], POSITIONS=positions is not None, **shared,
            ASM=runs_assembly(q.device), KG=kivi_group(spec.page_size),
            num_warps=warps, num_stages=self.tuning.num_stages,
            MASK_TAIL=self.tuning.masks_tail(spec.k_format, spec.v_format), **write_flags,
        )  # fmt: skip
        qk_scale = (scale if scale is not None else 1.0 / math.sqrt(d)) * LOG2E

        def arguments(n_splits: int) -> tuple:
            """The split kernel's arguments before its first (q) and its outputs (launch_decode
            puts both in)."""
            return (
                table, length_t,
                positions.reshape(-1) if positions is not None else length_t, self._signs,
                kq, ks, km, vq, vs, vm, *self._open_pages.of_layer(layer), slots,
                qk_scale, stride_bt, stride_qt, n_splits, window, *write_args,
            )  # fmt: skip

        per_sm = self.tuning.programs_per_sm
        planned = 1 if splits_as_one else n_seqs
        if not per_sm:
            probe = self._split_count(planned, n_tokens, window)  # any count but 1 compiles alike
            per_sm = fitting_programs(q, consts, arguments(probe))
        n_splits = self._split_count(planned, n_tokens, window, per_sm)
        if sinks is not None:
            if sinks.numel() != n_heads:
                raise UnsupportedTensor(f"{sinks.numel()} attention sinks for {n_heads} heads")
            sinks = sinks_in_log2(sinks, q.device)
        out = launch_decode(
            q,
            arguments(n_splits),
            consts,
            n_splits,
            spec,
            self._signs,
            self.tuning,
            sinks,
            quantized,
        )
        if step_row is not None and self.kivi:  # the row's page sealed if the row filled it
            self._open_pages.seal(
                layer, seqs[0], table, self.n_pages, (kq, ks, km), 0, positions.reshape(-1), 1,
                kq, True,
            )  # fmt: skip
        return out.squeeze(1) if one_token else out

    def _step_row_arguments(self, row: StepRow | None, q: torch.Tensor, n_seqs: int,
                            positions: torch.Tensor | None) -> tuple[tuple, dict]:  # fmt: skip
        """The split kernel's write arguments after `window` and its WRITE flags: for `row`
        (attend's step_row), else placeholders and no write."""
        spec, spare = self.spec, self._signs
        if row is None:
            return (spare, spare, 0, 0, spare, spare, spare, spare, 1.0, 0), {}
        shape = (1, spec.n_kv_heads, spec.head_dim)
        if n_seqs != 1 or q.shape[1] != 1 or positions is None:
            raise UnsupportedTensor(
                "a step's row is written by the attention for one sequence's one query at "
                "device positions: use write"
            )
        if tuple(row.k.shape) != shape or tuple(row.v.shape) != shape:
            raise UnsupportedTensor(
                f"a step's K and V rows of shapes {tuple(row.k.shape)} and "
                f"{tuple(row.v.shape)}: need {shape}"
            )
        k, v = _rows_of_heads(row.k), _rows_of_heads(row.v)
        pointers, flags = rope_arguments(
            q.shape[2], spec.n_kv_heads, spec.head_dim, row.rope, row.biases, None, self.device,
            spare,
        )  # fmt: skip
        bq, bk, bv, _, _, _, inv_freq, mscale = pointers
        del flags["HAS_NORM"]
        arguments = (k, v, k.stride(0), v.stride(0), bq, bk, bv, inv_freq, mscale, self.n_pages)
        return arguments, {"WRITE": True, **flags}

    def _split_count(
        self, n_seqs: int, n_tokens: int, window: int, per_sm: int = INTERPRETER_PROGRAMS_PER_SM
    ) -> int:
        """Splits of the sequence for attention, from the capacity (or the window's span),
        never the length: about `per_sm` programs per SM."""
        span = self.n_pages
        if window > 0:  # the positions the T queries see lie on at most this many pages
            span = min(span, triton.cdiv(window + n_tokens - 1, self.spec.page_size) + 1)
        programs = per_sm * _sm_count(self.device)
        wanted = triton.cdiv(programs, n_seqs * self.spec.n_kv_heads)
        return max(1, min(wanted, span))

    def gather(self, layer: int, seq: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Positions 0..n-1 of seq as f16 rows [n, n_kv_heads, head_dim], K and V, dequantized
        and unrotated on the device (one launch each): what a prefill chunk attends to."""
        spec = self.spec
        held = self.n_pages if seq in self._views else len(self._pages[seq])
        if not 0 < n <= held * spec.page_size:
            raise UnsupportedTensor(
                f"{n} positions gathered from a sequence with room for "
                f"{held * spec.page_size}: grow it first"
            )
        pages = triton.cdiv(n, spec.page_size)
        shape = (n, spec.n_kv_heads, spec.head_dim)
        rows = []
        roles = ((spec.k_format, self._k[layer]), (spec.v_format, self._v[layer]))
        for role, (fmt, planes) in enumerate(roles):
            out = torch.empty(shape, dtype=torch.float16, device=self.device)
            kv_gather_kernel[(pages, spec.n_kv_heads)](
                self._tables[seq], out, *plane_pointers(planes), self._signs, n,
                *self._open_pages.of_layer(layer), self._open_pages.slots[seq], role,
                int(self.kivi),
                HKV=spec.n_kv_heads, D=spec.head_dim, LOG2D=int(math.log2(spec.head_dim)),
                P=spec.page_size, FMT=FORMAT_CODES[fmt], KG=kivi_group(spec.page_size),
            )  # fmt: skip
            rows.append(out)
        return rows[0], rows[1]

    def attend_prefill(
        self,
        layer: int,
        q: torch.Tensor,
        seq: int,
        positions: torch.Tensor,
        n_keys: int,
        scale: float | None = None,
        *,
        window: int = 0,
        masks: dict | None = None,
    ) -> torch.Tensor:
        """Attention of a prefill chunk, q [T, n_heads, head_dim] at `positions` [T] (device),
        over the stored positions 0..n_keys-1 (the chunk's own K and V written first): the
        pages gathered to f16, then torch's scaled_dot_product_attention with the causal (and
        sliding-window) mask, the query heads of a KV head folded into one (grouped_attention.py:
        no score matrix). Returns [T, n_heads, head_dim] in q's dtype.

        masks: a dict the caller keeps for one prefill chunk (every layer of it attends from the
        same positions over the same n_keys): the chunk's additive mask is made at the first
        layer that asks for it, before that layer's gather, kept there and taken by every
        layer after it, one per window (kivi4 keys: per scratch; kernels/prefill_masks.py), so
        a later layer only gathers and attends. None: made for this call alone."""
        dtype = torch.float16 if q.is_cuda else torch.float32  # the CPU: tests only
        group = q.shape[1] // self.spec.n_kv_heads
        scratch = self._open_pages.layer_scratch(layer) if self.kivi else None
        mask = chunk_mask(masks, scratch, self.spec.page_size, positions, n_keys, window, group,
                          dtype)  # fmt: skip
        k, v = self.gather(layer, seq, n_keys)
        if scratch is not None:  # the own pages' exact rows as more keys
            rows = scratch[0]
            k = torch.cat([k, rows[0]])  # one at a time: one gathered copy freed first
            v = torch.cat([v, rows[1]])
        k, v = k.transpose(0, 1).to(dtype), v.transpose(0, 1).to(dtype)
        return grouped_prefill_attention(q, k, v, mask, scale)

    def read_rows(self, layer: int, seq: int) -> tuple[np.ndarray, np.ndarray]:
        """K and V of seq as the cache would return them (dequantized, unrotated; float32
        numpy [length, n_kv_heads, head_dim]): for checks, slow."""
        from kernels.kv_readback import dequantize_kivi_pages, dequantize_pages

        pages = self._pages[seq]
        n = self._lengths[seq]
        v = dequantize_pages(self.spec.v_format, self._v[layer], pages, self.spec)
        if not self.kivi:
            k = dequantize_pages(self.spec.k_format, self._k[layer], pages, self.spec)
            return k[:n], v[:n]
        slot = self._open_pages.slots[seq]
        open_rows = self._open_pages.rows[layer][slot]  # [2, heads, P, D]
        open_page = int(self._open_pages.page_numbers[layer][slot])
        k = dequantize_kivi_pages(self._k[layer], pages, open_rows[0], open_page)
        if open_page < len(pages):  # the open page's values as written
            rows = open_rows[1].transpose(0, 1).float().cpu().numpy()
            v[open_page * self.spec.page_size : (open_page + 1) * self.spec.page_size] = rows
        return k[:n], v[:n]
