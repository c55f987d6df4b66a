"""Building blocks shared by two or more algorithms (see docs/architecture.md, "Layers").

A family's own blocks live in its home: :mod:`rllib_ext.common.blackbox` (with the perturbation
samplers, return shaping and the ES gradient), :mod:`rllib_ext.common.erl` (with the population
update), :mod:`rllib_ext.common.offpolicy` (TD3's blocks, transitions, target networks),
:mod:`rllib_ext.common.refer`; the modules directly here serve several families.
"""
