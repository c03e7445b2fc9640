"""Speed of Hearth's kernels against the GPU's own speed of light (developer-run, GPU only).

    python -m benchmarks.kernels                 GEMV and decode attention, Llama-3-8B shapes
    python -m benchmarks.kernels --sweep         also try GEMV tile shapes (batch 1)
    python -m benchmarks.kernels --json out.json

Every figure is timed as CUDA-graph replays (launch overhead out, as in a captured decode
step) over enough copies of the data that the 50 MB L2 cannot hold them, and is set beside
the device-to-device copy bandwidth measured in the same run (bytes read + bytes written).
"""
