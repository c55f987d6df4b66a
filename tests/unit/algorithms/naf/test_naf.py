"""NAFConfig: paper 003 App. A defaults."""

from __future__ import annotations

from rllib_ext.algorithms.naf.naf import NAFConfig


def test_paper_defaults():
    n = NAFConfig()
    assert (n.lr, n.train_batch_size_per_learner, n.tau, n.exploration_sigma, n.gamma) == (1e-4, 256, 0.01, 0.2, 0.995)
