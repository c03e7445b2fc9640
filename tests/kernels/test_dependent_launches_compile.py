"""The RMSNorm and kivi4's seal as dependent launches (sm_90+: kernels/norms.py's WAIT_PRIOR,
kernels/kv_kivi.py's GDC) compile for sm_90 without a GPU, with the norm's weight read before
its wait (its trigger after it where it computes routing weights) and the seal's trigger and
wait before any read: their PTX, in a child process (this
directory's conftest puts Triton in interpreter mode, which never compiles)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import triton

PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import json
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from kernels.kv_kivi import kivi_seal_kernel
    from kernels.norms import _rms_norm_kernel

    def ptx(fn, types, consts, warps):
        signature = {a: "constexpr" if a in consts else types.get(a, "i32") for a in fn.arg_names}
        src = ASTSource(fn, signature, constexprs=consts)
        target = GPUTarget("cuda", 90, 32)
        return triton.compile(src, target=target, options={"num_warps": warps}).asm["ptx"]

    norm_types = {"x_ptr": "*fp16", "r_ptr": "*fp16", "b_ptr": "*fp32", "w_ptr": "*fp32",
                  "y_ptr": "*fp16", "h_ptr": "*fp16", "xq_ptr": "*i32", "xd_ptr": "*fp32",
                  "xs_ptr": "*i32", "eps": "fp32", "z_ptr": "*fp32", "top_ptr": "*fp32",
                  "weights_ptr": "*fp32"}
    norm_consts = {"HAS_RESIDUAL": True, "HAS_BIAS": False, "QUANTIZE": True,
                   "LET_NEXT_START": True, "BLOCK": 2048, "WAIT_PRIOR": True, "ROUTE": False,
                   "K": 8, "K_PAD": 8, "E_PAD": 128, "SOFTMAX_ALL": True, "NORMALIZE": True}
    norm = ptx(_rms_norm_kernel, norm_types, norm_consts, 8)
    # with the routing weights of picks made beside wo (kernels/router_beside_wo.py)
    routed = ptx(_rms_norm_kernel, norm_types, {**norm_consts, "ROUTE": True}, 8)
    seal = ptx(
        kivi_seal_kernel,
        {"scratch_ptr": "*fp16", "open_ptr": "*fp16", "block_table_ptr": "*i32",
         "positions_ptr": "*i32", "q_ptr": "*i8", "scale_ptr": "*fp16",
         "min_ptr": "*fp16"},
        {"HKV": 4, "D": 128, "P": 64, "G": 32, "POSITIONS": True, "SCRATCH": False,
         "ROWS": False, "GDC": True},
        4,
    )
    print(json.dumps({"norm": norm, "routed": routed, "seal": seal}))
    """
)


@pytest.mark.skipif(not PTXAS.exists(), reason="Triton's bundled ptxas missing")
def test_the_norm_and_the_seal_compile_as_dependent_launches_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, cwd=ROOT, env=env,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    ptx = json.loads(done.stdout.strip().splitlines()[-1])
    norm, seal = ptx["norm"], ptx["seal"]
    wait = norm.index("griddepcontrol.wait")
    assert norm.index("griddepcontrol.launch_dependents") < wait
    assert norm.index("ld.global") < wait, "the norm's weight is read before its wait"
    assert norm.count("griddepcontrol.wait") == 1
    # routing: the next kernel (the expert gate/up, which reads the picks before its own wait)
    # is let in only after the norm's wait, when wo's launch that wrote them has ended
    routed = ptx["routed"]
    assert routed.index("griddepcontrol.wait") < routed.index("griddepcontrol.launch_dependents")
    assert routed.count("griddepcontrol.launch_dependents") == 1
    wait = seal.index("griddepcontrol.wait")
    assert seal.index("griddepcontrol.launch_dependents") < wait
    assert "ld.global" not in seal[:wait], "the seal reads nothing before its wait"
