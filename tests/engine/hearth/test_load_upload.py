"""Transformer.load through the read-ahead uploader (engine/hearth/upload.py) on the CPU: the
load asks for exactly the tensors it planned, in the planned order (none read aside, none
skipped), and the model it makes computes what the plain mapped load's model computes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.gguf import read_model_info
from engine.hearth import weights
from engine.hearth.config import model_config
from engine.hearth.expert_offload import ExpertPlacement
from engine.hearth.forward import Transformer
from engine.hearth.kv_cache import TorchKVCache
from engine.hearth.ops import TorchOps
from engine.hearth.upload import FileUploader
from engine.hearth.weights import GGUFTensors
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

TOKENS = [5, 17, 300, 42, 0, 99]

CASES = {
    "qwen3-tied": (tiny_spec("qwen3"), ExpertPlacement()),
    "qwen2-biases-untied": (tiny_spec("qwen2"), ExpertPlacement()),
    "qwen2moe-shared-expert": (tiny_spec("qwen2moe"), ExpertPlacement()),
    "gpt-oss": (tiny_spec("gpt-oss"), ExpertPlacement()),
    "llama-moe-last-layer-in-ram": (tiny_spec("llama-moe"), ExpertPlacement(1, 0)),
}


def _logits(model: Transformer) -> np.ndarray:
    cfg = model.config
    cache = TorchKVCache(
        n_layer=cfg.n_layer, n_head_kv=cfg.n_head_kv, head_dim=cfg.head_dim, n_ctx=16
    )
    ids = torch.tensor(TOKENS)
    positions = torch.arange(len(TOKENS))
    return model.forward(ids, positions, cache, n_keys=len(TOKENS), all_logits=True).numpy()


@pytest.mark.parametrize("case", list(CASES))
def test_the_load_asks_for_its_plan_in_order_and_computes_the_same(tmp_path, monkeypatch, case):
    spec, placement = CASES[case]
    path = write_tiny_gguf(tmp_path / f"{case}.gguf", spec)
    info = read_model_info(path)
    config = model_config(info)
    plain = Transformer.load(
        config, GGUFTensors(str(path), info), TorchOps("cpu"), experts=placement
    )

    made: list[FileUploader] = []

    class Recording(FileUploader):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(weights, "FileUploader", Recording)
    # the CPU's tensors through the uploader too, as a GPU's go
    monkeypatch.setattr(GGUFTensors, "uploads_to", staticmethod(lambda device: device is not None))
    uploaded = Transformer.load(
        config, GGUFTensors(str(path), info), TorchOps("cpu"), experts=placement
    )
    assert len(made) == 1
    upload = made[0]
    assert upload.reads_aside == 0
    assert upload._next_range == len(upload._ranges) > 0  # every planned range asked for
    assert not any(piece.dropped for piece in upload._pieces)
    np.testing.assert_array_equal(_logits(uploaded), _logits(plain))


def test_a_load_that_fails_midway_stops_its_readers(tmp_path, monkeypatch):
    path = write_tiny_gguf(tmp_path / "m.gguf", tiny_spec("qwen3"))
    info = read_model_info(path)
    made: list[FileUploader] = []

    class Recording(FileUploader):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    class FailingOps(TorchOps):
        prepared = 0

        def prepare(self, w):
            self.prepared += 1
            if self.prepared == 3:
                raise torch.OutOfMemoryError("out of memory (simulated)")
            return super().prepare(w)

    monkeypatch.setattr(weights, "FileUploader", Recording)
    monkeypatch.setattr(GGUFTensors, "uploads_to", staticmethod(lambda device: device is not None))
    with pytest.raises(torch.OutOfMemoryError):
        Transformer.load(model_config(info), GGUFTensors(str(path), info), FailingOps("cpu"))
    assert len(made) == 1
    assert not any(thread.is_alive() for thread in made[0]._readers)
