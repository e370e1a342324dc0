"""One module per section of BENCHMARKS.md; bench/run.py runs them."""
