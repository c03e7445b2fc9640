"""What the tests and the benchmarks both need and the app never ships: GGUF files of real
models' shapes (synthetic_gguf), a tiny reranker with its score in numpy (tiny_reranker).
engine/, kernels/ and app/ never import it."""
