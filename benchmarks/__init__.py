"""Timing and cross-check scripts; their results are in benchmarks/RESULTS.md.

Each script runs from the repository's root as a module, e.g.
``python -m benchmarks.bench_penalty --lams=1e-3,1e-2``; its flags are absl flags
(``--help`` lists them).
"""
