"""Fair races for users: ``rllib race`` and ``rllib report`` (the command line is :mod:`rllib_ext.cli`).

- :mod:`rllib_ext.compare.race`: entries of any registered name (RLlib's built-ins too) built from
  one shared config, the equal-settings check before any run, interleaved seeds, deterministic
  evaluation, one row per run; long races in chunks (``--stop-after-s``/``--resume``).
- :mod:`rllib_ext.compare.rows`: the row schema (one JSON line per run) and its reader/writer.
- :mod:`rllib_ext.compare.report`: figures and the Markdown summary from the rows alone: IQM with
  stratified bootstrap CIs and the probability of improvement (:mod:`rllib_ext.stats`).
"""
