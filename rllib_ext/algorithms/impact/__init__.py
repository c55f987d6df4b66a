"""IMPACT (Luo et al., paper 004) as the RLlib algorithm ``IMPACT_EXT``."""

from rllib_ext.algorithms.impact.impact import IMPACT, IMPACTConfig

__all__ = ["IMPACT", "IMPACTConfig"]
