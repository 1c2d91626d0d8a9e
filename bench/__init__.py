"""Benchmarks: `make bench` (python -m bench)."""
