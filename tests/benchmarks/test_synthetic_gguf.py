"""The synthetic GGUF tool writes files that Hearth's reader and llama.cpp both accept."""

from benchmarks.synthetic_gguf import SHAPES, write_random_f16_gguf
from engine.gguf import read_model_info
from engine.runtime import protocol as p
from engine.starter_model import starter_model_path
from tests.engine.runtime.conftest import GREEDY, RunningEngine


def test_a_random_f16_file_loads_and_generates(tmp_path):
    # The starter model's tokenizer stands in for a llama.cpp vocabulary file.
    path = write_random_f16_gguf(
        tmp_path / "tiny.gguf", SHAPES["llama-tiny"], str(starter_model_path())
    )
    info = read_model_info(path)
    assert (info.architecture, info.block_count, info.vocab_size) == ("llama", 4, 49152)
    assert {t.type_name for t in info.tensors} == {"F16", "F32"}
    engine = RunningEngine()
    try:
        assert isinstance(engine.load(str(path), n_ctx=512), p.ModelLoaded)
        _, done = engine.run(prompt="Hello", sampling=GREEDY, max_tokens=4, ignore_eos=True)
        assert isinstance(done, p.GenerationDone) and done.stats.n_generated == 4
    finally:
        engine.close()
