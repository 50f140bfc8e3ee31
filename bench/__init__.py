"""Benchmarks, each runnable as ``python -m bench.<name>``."""
