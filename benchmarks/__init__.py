"""Benchmark scripts, each run from the checkout as ``uv run python benchmarks/<script>.py``.

The project's editable install (``uv sync``) puts the checkout's top folder on the import path,
so a script imports its helpers as ``benchmarks.<module>`` and the tests' as ``testkit.<module>``.
Each benchmark records its run in benchmarks/results.jsonl (`benchmarks.results`).
"""
