"""rllib_ext algorithms: one sub-package per paper method, in RLlib's own file split.

Each ``<algo>/<algo>.py`` holds only the Config and the Algorithm (light to import: the registry
imports it on ``import rllib_ext``); learners, RL modules and torch code are imported lazily.
"""
