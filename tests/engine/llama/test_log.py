import pytest

from engine.llama.log import BufferAllocation, parse_buffer_line

MIB = 1024 * 1024


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            "load_tensors:        CUDA0 model buffer size =  4403.49 MiB\n",
            BufferAllocation(device="CUDA0", kind="model", bytes=round(4403.49 * MIB)),
        ),
        (
            "load_tensors:   CPU_Mapped model buffer size =   281.81 MiB",
            BufferAllocation(device="CPU_Mapped", kind="model", bytes=round(281.81 * MIB)),
        ),
        (
            "llama_kv_cache:      CUDA0 KV buffer size =   512.00 MiB",
            BufferAllocation(device="CUDA0", kind="KV", bytes=512 * MIB),
        ),
        (
            "sched_reserve:      CUDA0 compute buffer size =   258.50 MiB",
            BufferAllocation(device="CUDA0", kind="compute", bytes=round(258.5 * MIB)),
        ),
        (
            "llama_context:  CUDA_Host  output buffer size =     0.49 MiB",
            BufferAllocation(device="CUDA_Host", kind="output", bytes=round(0.49 * MIB)),
        ),
        ("llama_context: n_ctx = 4096", None),
        ("print_info: model size = 4.58 GiB", None),
    ],
)
def test_buffer_lines_from_llama_cpp(line, expected):
    assert parse_buffer_line(line) == expected


def test_the_process_has_one_log_callback_that_outlives_its_users():
    """llama.cpp keeps the callback's address for good: a second LlamaLog let the first be
    freed while llama.cpp still called it (SIGSEGV in a later load, order-dependent)."""
    import gc

    from engine.llama.log import process_log

    first = id(process_log())
    callback = process_log()._callback
    gc.collect()
    assert id(process_log()) == first
    assert process_log()._callback is callback
