"""pyptx benchmarks: `python -m benchmarks [--quick] [--gpu]` runs them all (benchmarks/__main__.py);
each `bench_*.py` script also runs on its own."""
