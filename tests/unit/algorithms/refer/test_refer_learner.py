"""ReFERLearner (Algorithm 1's inner loop), built in-process without Ray: the schedules that
`_gradient_step` applies (PER's β; β's step and η(t) of Eq. 12-13)."""

from __future__ import annotations

import numpy as np

from rllib_ext.algorithms.naf.naf import NAFConfig
from tests.builders import small_refer_learner
from tests.replay_data import replay_episode


def _filled(learner, steps=40, seed=0):
    rng = np.random.default_rng(seed)
    learner.memory.add_episode(**replay_episode(steps, rng, d_s=3, d_a=2))
    return learner


def test_per_beta_reaches_one_over_the_horizon():
    """Schaul et al. (2016 §3.4): PER's β rises linearly from per_beta to 1, then stays 1."""
    learner = _filled(small_refer_learner(NAFConfig, replay_mode="per", per_beta=0.5, per_beta_anneal_steps=4))
    betas = []
    for _ in range(6):
        learner._gradient_step()
        betas.append(learner.memory.per_beta)
    np.testing.assert_allclose(betas, [0.5, 0.625, 0.75, 0.875, 1.0, 1.0])
