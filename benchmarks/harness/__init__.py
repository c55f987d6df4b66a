"""The project's entry points to the race harness, which is part of the package (:mod:`rllib_ext.compare`).

- :mod:`benchmarks.harness.race`: ``rllib race`` under the name the committed rows record as their
  command (``python -m benchmarks.harness.race``), writing into ``benchmarks/results/``.
- :mod:`benchmarks.harness.report`: ``make bench-report``, the races' figures in ``docs/results/``
  and the summary in ``benchmarks/RESULTS.md`` (:mod:`rllib_ext.compare.report`), with the project's
  measurement tables.
"""
