"""What the tests and the benchmarks both need and the app never ships: GGUF files of real
models' shapes (synthetic_gguf). engine/, kernels/ and app/ never import it."""
