"""The wire protocol's settings as llama.cpp's: where sampling runs, and how many rows of logits
a decode returns."""

import pytest

from engine.runtime import protocol as p
from engine.runtime.to_llama import context_settings


def _params(method: str, **kwargs) -> p.ModelParams:
    return p.ModelParams(
        path="m.gguf", speculative=p.SpeculativeParams(method=method, max_draft=8), **kwargs
    )


@pytest.mark.parametrize("method", ["off", "prompt_lookup", "draft_model"])
def test_speculating_samples_in_the_graph_as_plain_decoding_does(method):
    assert context_settings(_params(method)).backend_sampling
    assert not context_settings(_params(method, backend_sampling=False)).backend_sampling


def test_mtp_samples_on_the_cpu():
    """MTP makes llama.cpp output every row of a batch, prompt included: none is sampled."""
    assert not context_settings(_params("mtp")).backend_sampling


def test_a_speculating_decode_returns_the_last_token_and_the_drafts():
    assert context_settings(_params("off")).n_outputs == 1
    assert context_settings(_params("prompt_lookup")).n_outputs == 9
    assert context_settings(_params("prompt_lookup", n_parallel=4)).n_outputs == 1


def test_auto_is_plain_decoding_on_llama_cpp():
    """ "auto" never speculates on llama.cpp (speculative/setup.py): one row a decode."""
    assert context_settings(_params("auto")).n_outputs == 1
