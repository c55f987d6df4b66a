"""MLPPolicy: heads, actions, flat parameters, unsupported specs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rllib_ext.common.policies import MLPPolicy


def test_gaussian_2a_head_maps_variance_onto_unit_interval():
    space = gym.spaces.Box(-2.0, 2.0, shape=(3,), dtype=np.float32)
    policy = MLPPolicy(5, space, hiddens=(8,), head="gaussian_2a")
    obs = torch.randn(100, 5) * 10
    dist = policy.distribution(obs)
    variance_unit = (dist.stddev / 2.0) ** 2  # half-range 2: std in env units = 2·sqrt(var)
    assert torch.all(variance_unit <= 1.0 + 1e-6) and torch.all(variance_unit >= 0.0)
    t = torch.tanh(policy.net(obs))
    np.testing.assert_allclose(variance_unit.detach(), ((t[:, 3:] + 1) / 2).detach(), rtol=1e-4, atol=1e-6)
    a = policy.act(np.ones(5, np.float32), explore=True)
    assert a.shape == (3,) and np.all(np.abs(a) <= 2.0)


def test_deterministic_box_action_in_bounds_and_discrete_argmax():
    box = gym.spaces.Box(np.array([0.0, -1.0]), np.array([4.0, 1.0]), dtype=np.float32)
    policy = MLPPolicy(3, box, hiddens=(4,))
    for _ in range(20):
        a = policy.act(np.random.randn(3).astype(np.float32) * 100)
        assert 0.0 <= a[0] <= 4.0 and -1.0 <= a[1] <= 1.0
    disc = MLPPolicy(3, gym.spaces.Discrete(4), hiddens=(4,))
    obs = np.random.randn(3).astype(np.float32)
    assert disc.act(obs) == int(torch.argmax(disc.net(torch.from_numpy(obs))))


def test_flat_parameters_round_trip():
    policy = MLPPolicy(4, gym.spaces.Discrete(2), hiddens=(8, 8))
    theta = np.random.default_rng(1).normal(size=policy.num_params).astype(np.float32)
    policy.set_flat(theta)
    np.testing.assert_array_equal(policy.get_flat(), theta)


@pytest.mark.parametrize(
    "space,head,match",
    [
        (gym.spaces.Discrete(2), "gaussian_2a", "needs a Box"),
        (gym.spaces.Box(-1, 1, shape=(2, 2)), "deterministic", "1-d Box"),
        (gym.spaces.Discrete(2), "nope", "unknown policy head"),
    ],
)
def test_unsupported_policy_specs_are_clear_errors(space, head, match):
    with pytest.raises(ValueError, match=match):
        MLPPolicy(3, space, head=head)


LOW, HIGH = np.array([-1.0, 0.0], np.float32), np.array([3.0, 1.0], np.float32)  # half (2, 0.5)


SPACE = gym.spaces.Box(LOW, HIGH, dtype=np.float32)


def test_deterministic_action():
    actor = MLPPolicy(3, SPACE, hiddens=(400, 300), activation="tanh")
    obs = torch.randn(4, 3)
    a = actor.deterministic_action(obs)
    assert a.requires_grad and a.shape == (4, 2)
    np.testing.assert_allclose(a[0].detach().numpy(), actor.act(obs[0].numpy()), rtol=1e-6)
    assert (a.detach().numpy() >= LOW).all() and (a.detach().numpy() <= HIGH).all()
    with pytest.raises(ValueError, match="Box"):
        MLPPolicy(3, gym.spaces.Discrete(2)).deterministic_action(obs)
