"""Building blocks shared by two or more algorithms (see design.md, "Layout").

* :mod:`rllib_ext.common.samplers` — perturbation samplers reproducible from (seed, index).
* :mod:`rllib_ext.common.shaping` — return shaping by name.
* :mod:`rllib_ext.common.es_gradient` — the ES gradient estimator.
"""
