"""The benchmark harness: races write rows of data, the report draws figures and tables from them.

- :mod:`benchmarks.harness.rows`: the row schema (one JSON line per run) and its reader/writer.
- :mod:`benchmarks.harness.race`: runs algorithms interleaved with identical shared settings and
  evaluates them with deterministic actions (``python -m benchmarks.harness.race --help``).
- :mod:`benchmarks.harness.report`: ``make bench-report``, figures in ``docs/results/`` and the
  summary in ``benchmarks/RESULTS.md``.

The statistics (IQM, stratified bootstrap CIs) live in :mod:`rllib_ext.stats`, shared with
``rllib plot``.
"""
