"""The synthetic GGUF tool writes files that Hearth's reader and llama.cpp both accept."""

from engine.gguf import read_model_info
from engine.runtime import protocol as p
from engine.starter_model import starter_model_path
from testkit.synthetic_gguf import SHAPES, write_random_f16_gguf
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


def test_the_mtp_file_declares_its_nextn_layer_and_has_its_tensors(tmp_path):
    from engine.planner.draft import mtp_layers
    from testkit.synthetic_gguf import main

    out = tmp_path / "mtp.gguf"
    assert main(["glm4moe-mtp-tiny", str(out), "--vocab", str(starter_model_path())]) == 0
    info = read_model_info(out)
    assert (info.architecture, info.block_count, mtp_layers(info)) == ("glm4moe", 3, 1)
    names = {t.name for t in info.tensors}
    assert {"blk.2.nextn.eh_proj.weight", "blk.2.nextn.enorm.weight"} <= names
    assert "blk.1.nextn.eh_proj.weight" not in names  # the trunk's blocks have none
    assert "output.weight" not in names  # tied: the token embedding is the output
    assert {t.type_name for t in info.tensors} == {"F32"}
