"""llama.cpp's decode loop beside a Python thread that holds the GIL (what the worker's Hearth
warm-up does while it imports torch, Triton and kernels/: engine/runtime/hearth_prewarm.py).

    python -m benchmarks.gil_beside_decode MODEL.gguf [--threads 1] [--tokens 64]

Prints tokens/s of a greedy llama-cpp-python loop alone, beside a thread running Python
bytecode, and alone again. Each llama.cpp call releases the GIL and takes it back after; with
another thread running Python, taking it back waits up to the interpreter's switch interval.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp's CPU threads")
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args(argv)
    import llama_cpp

    llm = llama_cpp.Llama(args.model, n_ctx=2048, n_threads=args.threads, verbose=False)
    prompt = llm.tokenize(b"Hello there, this is a test of decoding speed on this machine.")

    def rate() -> float:
        llm.reset()
        llm.eval(prompt)
        started = time.perf_counter()
        for _ in range(args.tokens):
            llm.eval([llm.sample(temp=0.0)])
        return args.tokens / (time.perf_counter() - started)

    print(f"alone: {rate():.1f} tok/s", flush=True)
    stop = threading.Event()

    def busy() -> None:  # pure Python, as an import is
        n = 0
        while not stop.is_set():
            n += 1

    thread = threading.Thread(target=busy, daemon=True)
    thread.start()
    print(f"beside a thread running Python: {rate():.1f} tok/s", flush=True)
    stop.set()
    thread.join()
    print(
        f"alone again: {rate():.1f} tok/s (switch interval {sys.getswitchinterval() * 1e3:.0f} ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
