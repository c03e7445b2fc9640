"""The batch on the starter model's real weights (SmolLM2-135M-Instruct Q4_1, CPU): four
sequences of different lengths decoded together equal each decoded alone, at test_forward.py's
tolerance (test_batch_cache.py runs the same on tiny random models)."""

from __future__ import annotations

import pytest

from engine.gguf import read_model_info
from engine.hearth.config import model_config
from engine.hearth.forward import Transformer
from engine.hearth.ops import TorchOps
from engine.hearth.weights import GGUFTensors
from tests.engine.hearth import test_batch_cache as batch

pytestmark = pytest.mark.slow


def test_four_sequences_together_equal_each_alone_on_the_starter_model(starter_model):
    info = read_model_info(starter_model)
    model = Transformer.load(model_config(info), GGUFTensors(str(starter_model), info), TorchOps())
    batch.test_batched_decode_equals_each_sequence_alone(model)
