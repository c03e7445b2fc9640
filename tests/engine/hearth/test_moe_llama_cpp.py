"""Tiny random mixture-of-experts models of each architecture, against llama.cpp's CPU build.

The same rule as the real models (test_real_models.py, engine/runtime/greedy_check.py):
teacher-forced on the CPU build's greedy tokens, the Hearth engine's argmax is the CPU build's
or a near-tie, its logits on the CPU build's top-5 are within the tolerance, and its own greedy
text leaves the CPU build's only at the first near-tie. The files carry the starter model's
tokenizer (llama.cpp loads no file without a vocabulary) and an output matrix scaled so that
the logits spread over several units (a wrong layer moves them by units, rounding by tenths).
Their routers choose experts by clear margins (tiny_models.ROUTE_VALUE), so that rounding does
not send a token through another expert in one engine and not the other.

Measured on this machine: max |logit difference| on the top-5 0.20-0.27; qwen3moe and qwen2moe
match exactly, gpt-oss and llama with experts diverge only at near-ties (docs/hearth-engine.md).
"""

from __future__ import annotations

import pytest

from tests.engine.hearth.test_real_models import judge
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

pytestmark = pytest.mark.slow
OUTPUT_SCALE = 4.0


@pytest.mark.parametrize("arch", ["qwen3moe", "qwen2moe", "gpt-oss", "llama-moe"])
def test_tiny_moe_model_matches_llama_cpp(arch, on_cpu, starter_model, tmp_path):
    spec = tiny_spec(arch, output_scale=OUTPUT_SCALE)
    path = write_tiny_gguf(tmp_path / f"{arch}.gguf", spec, vocab_from=starter_model)
    judge(path)
