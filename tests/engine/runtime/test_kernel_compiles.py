"""The first Hearth load of a model shape on a GPU says it compiles the kernels, and how long
that takes."""

from __future__ import annotations

from engine.runtime.kernel_compiles import (
    H200_FIRST_WARM_UP_S,
    CompileRecord,
    announced_warm_up,
    compile_key,
    kernels_digest,
)

GPU = "NVIDIA H200"


def test_a_first_load_says_so_with_the_h200_figure_then_not_again(tmp_path):
    record = CompileRecord(tmp_path / "compiles.json")
    key = compile_key(GPU, "llama 4096 Q4_K kv f16/f16")
    line = record.notice(key, GPU)
    assert line is not None
    assert f"compiling its GPU kernels, about {H200_FIRST_WARM_UP_S:.0f} s on an H200" in line
    assert f"on {GPU} with this install" in line
    record.note(key, GPU, 9.6)
    assert record.notice(key, GPU) is None


def test_a_new_shape_is_estimated_from_this_gpus_slowest_first_load(tmp_path):
    record = CompileRecord(tmp_path / "compiles.json")
    record.note(compile_key(GPU, "shape a"), GPU, 7.4)
    record.note(compile_key(GPU, "shape b"), GPU, 12.6)
    record.note(compile_key("NVIDIA GeForce RTX 4090", "shape c"), "NVIDIA GeForce RTX 4090", 30)
    line = record.notice(compile_key(GPU, "shape d"), GPU)
    assert "about 13 s (the slowest such load on this GPU)" in line


def test_a_record_that_cannot_be_read_or_written_only_repeats_the_line(tmp_path):
    path = tmp_path / "compiles.json"
    path.write_text("not json", encoding="utf-8")
    record = CompileRecord(path)
    assert record.notice("k", GPU) is not None
    blocked = CompileRecord(tmp_path / "a-file" / "compiles.json")
    (tmp_path / "a-file").write_text("", encoding="utf-8")  # the record's folder is a file
    blocked.note("k", GPU, 10.0)
    assert blocked.notice("k", GPU) is not None


def test_an_edited_kernel_changes_the_key(tmp_path):
    (tmp_path / "gemv.py").write_text("x = 1\n", encoding="utf-8")
    before = kernels_digest(tmp_path)
    (tmp_path / "gemv.py").write_text("x = 2\n", encoding="utf-8")
    assert kernels_digest(tmp_path) != before


def test_the_warm_up_is_announced_and_timed_only_the_first_time(tmp_path):
    record = CompileRecord(tmp_path / "compiles.json")
    lines, runs = [], []
    readings = iter([100.0, 111.5])
    announced_warm_up(
        record, "k", GPU, lambda: runs.append(1), lines.append, clock=lambda: next(readings)
    )
    assert runs == [1] and len(lines) == 1 and "compiling its GPU kernels" in lines[0]
    assert "about 12 s (the slowest such load on this GPU)" in record.notice("other", GPU)
    announced_warm_up(record, "k", GPU, lambda: runs.append(2), lines.append, clock=lambda: 0.0)
    assert runs == [1, 2] and len(lines) == 1  # compiled before: no line, the record kept
    assert "about 12 s" in record.notice("other", GPU)
