"""Speed of Hearth's kernels against the GPU's own speed of light (developer-run, GPU only).

    python -m benchmarks.kernels --list          every op timed, its reference and tests (CPU)
    python -m benchmarks.kernels                 every op at Llama-3-8B's shapes
    python -m benchmarks.kernels --ops quant_matmul,decode_attention --json out.json

Every figure is a row of one schema (results.py: op, shape, format, provider, metric, value,
unit), timed as CUDA-graph replays (launch overhead out, as in a captured decode step) over
enough copies of the data that the 50 MB L2 cannot hold them, and set beside the
device-to-device copy bandwidth measured in the same run (bytes read + bytes written).
"""
