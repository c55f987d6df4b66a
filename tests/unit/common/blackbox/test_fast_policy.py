"""NumpyPolicy: the numpy twin of MLPPolicy — same actions, per-episode block noise, views of θ."""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest
import torch

from rllib_ext.common.blackbox.fast_policy import NumpyPolicy
from rllib_ext.common.policies import ACTIVATIONS, DETERMINISTIC_HEADS, HEADS, MLPPolicy

OBS_DIM = 5
SPACES = {
    "discrete": gym.spaces.Discrete(3),
    "box_asymmetric": gym.spaces.Box(
        np.array([-2.0, 0.0, -0.5], np.float32), np.array([1.0, 3.0, 0.5], np.float32), dtype=np.float32
    ),
    # Infinite bounds map onto [-1, 1] per side: [-1, 1], [-1, 1], [-3, 1].
    "box_infinite": gym.spaces.Box(
        np.array([-np.inf, -np.inf, -3.0], np.float32), np.array([np.inf, np.inf, np.inf], np.float32), dtype=np.float32
    ),
}
HIDDENS = [(), (8,), (16, 16)]
CASES = [
    (space, head, activation, hiddens)
    for space, head, activation, hiddens in itertools.product(SPACES, HEADS, ACTIVATIONS, HIDDENS)
    if not (space == "discrete" and head == "gaussian_2a")  # MLPPolicy rejects it
]
STOCHASTIC_CASES = [
    (space, head, activation)
    for space, head, activation in itertools.product(SPACES, HEADS, ACTIVATIONS)
    if head not in DETERMINISTIC_HEADS and not (space == "discrete" and head == "gaussian_2a")
]
TOL = 1e-5  # float32 round-off (torch and BLAS sum the products in different orders)


def make_pair(space: str, head: str, activation: str = "tanh", hiddens=(8,), seed: int = 0, **kw):
    """A torch policy and its twin, both holding the same random θ (drawn at 0.5 scale)."""
    policy = MLPPolicy(OBS_DIM, SPACES[space], hiddens=hiddens, activation=activation, head=head)
    theta = (0.5 * np.random.default_rng(seed).standard_normal(policy.num_params)).astype(np.float32)
    policy.set_flat(theta)
    fast = NumpyPolicy(policy, **kw)
    fast.set_flat(theta)
    return policy, fast, theta


def random_obs(n: int, seed: int = 1) -> np.ndarray:
    return (2.0 * np.random.default_rng(seed).standard_normal((n, OBS_DIM))).astype(np.float32)


def torch_explored_action(policy: MLPPolicy, obs: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``center + half · clamp(mean + std · z, −1, 1)``, computed by torch from its own head."""
    with torch.no_grad():
        mean, std = policy._mean_std(policy.net(torch.from_numpy(obs)))
        return (policy._center + policy._half * (mean + std * torch.from_numpy(z)).clamp(-1.0, 1.0)).numpy()


@pytest.mark.parametrize("space,head,activation,hiddens", CASES)
def test_deterministic_actions_equal_torch(space, head, activation, hiddens):
    policy, fast, _ = make_pair(space, head, activation, hiddens)
    for obs in np.concatenate([random_obs(20), 100.0 * random_obs(5, seed=2)]):  # and saturated outputs
        with torch.no_grad():
            logits = policy.net(torch.from_numpy(obs)).numpy()
        np.testing.assert_allclose(fast.forward(obs), logits, rtol=TOL, atol=TOL)
        expected = policy.act(obs, explore=False)
        got = fast.act(obs, explore=False)
        if SPACES[space].shape == ():
            assert isinstance(got, int)
            top2 = np.sort(logits)[-2:]
            assert got == expected or top2[1] - top2[0] < TOL  # a near-tie may go either way
        else:
            assert got.dtype == np.float32 and got.shape == expected.shape
            np.testing.assert_allclose(got, expected, rtol=TOL, atol=TOL)
            assert np.all(got >= fast._center - fast._half) and np.all(got <= fast._center + fast._half)
        if head in DETERMINISTIC_HEADS:  # no distribution: exploring acts with the mean, draws nothing
            np.testing.assert_array_equal(fast.act(obs, explore=True), got)


def test_float64_and_list_observations_are_cast_to_float32_like_torch():
    policy, fast, _ = make_pair("box_asymmetric", "deterministic", hiddens=(16, 16))
    obs = np.random.default_rng(3).standard_normal(OBS_DIM) * 2.0  # float64
    np.testing.assert_allclose(fast.act(obs), policy.act(obs), rtol=TOL, atol=TOL)
    np.testing.assert_array_equal(fast.act(obs.tolist()), fast.act(obs.astype(np.float32)))


@pytest.mark.parametrize("space,head,activation", STOCHASTIC_CASES)
def test_explored_action_is_the_torch_formula_with_the_drawn_noise(space, head, activation):
    policy, fast, _ = make_pair(space, head, activation, hiddens=(16, 16), noise_block_steps=8)
    fast.begin_episode(np.random.default_rng(42))
    reference = np.random.default_rng(42)
    noises = []
    for k, obs in enumerate(random_obs(20)):
        a = fast.act(obs, explore=True)
        noise = fast.last_noise
        noises.append(noise)
        if k % 8 == 0:  # a new block: drawn from the same generator, in order
            if space == "discrete":
                block = reference.gumbel(size=(8, fast.action_dim))
            else:
                block = reference.standard_normal((8, fast.action_dim), dtype=np.float32)
        np.testing.assert_array_equal(noise, block[k % 8])
        if space == "discrete":
            with torch.no_grad():
                logits = policy.net(torch.from_numpy(obs)).numpy().astype(np.float64)
            assert a == int(np.argmax(logits + noise))  # Gumbel-max
        else:
            np.testing.assert_allclose(a, torch_explored_action(policy, obs, noise), rtol=TOL, atol=TOL)
    assert len({n.tobytes() for n in noises}) == len(noises)  # no noise row repeats across blocks


def _box_policy_with_mean(head: str, mean_unit: np.ndarray, std_unit: np.ndarray):
    """A one-hidden-layer Box policy whose mean/std (in [-1, 1] units) are given at obs = 0."""
    space = SPACES["box_asymmetric"]
    policy = MLPPolicy(OBS_DIM, space, hiddens=(8,), head=head)
    with torch.no_grad():
        for p in policy.parameters():
            p.zero_()
        last = policy.net[-1]
        last.bias[:3] = torch.as_tensor(np.arctanh(mean_unit), dtype=torch.float32)
        if head == "gaussian":
            policy.log_std[:] = torch.as_tensor(np.log(std_unit), dtype=torch.float32)
        else:  # gaussian_2a: variance (t + 1) / 2 = std² → t = 2·std² − 1
            last.bias[3:] = torch.as_tensor(np.arctanh(2 * std_unit**2 - 1), dtype=torch.float32)
    return policy


@pytest.mark.parametrize("head", ["gaussian", "gaussian_2a"])
def test_explored_box_actions_have_the_distribution_of_torch(head):
    # Means well inside the bounds and small stds: clipping is negligible (> 4.5 std away).
    policy = _box_policy_with_mean(head, np.array([0.2, -0.3, 0.0]), np.array([0.1, 0.05, 0.15]))
    fast = NumpyPolicy(policy)
    obs = np.zeros(OBS_DIM, np.float32)
    fast.begin_episode(np.random.default_rng(7))
    n = 20_000
    actions = np.stack([fast.act(obs, explore=True) for _ in range(n)])  # crosses 78 noise blocks
    dist = policy.distribution(torch.from_numpy(obs))
    loc, scale = dist.mean.detach().numpy(), dist.stddev.detach().numpy()
    np.testing.assert_allclose(actions.mean(0), loc, atol=float(5 * scale.max() / np.sqrt(n)))
    np.testing.assert_allclose(actions.std(0), scale, rtol=5 / np.sqrt(2 * n))


def test_discrete_explored_frequencies_match_the_softmax():
    policy = MLPPolicy(OBS_DIM, SPACES["discrete"], hiddens=(8,), head="gaussian")
    with torch.no_grad():
        for p in policy.parameters():
            p.zero_()
        policy.net[-1].bias[:] = torch.log(torch.tensor([0.2, 0.5, 0.3]))
    fast = NumpyPolicy(policy, noise_block_steps=100)
    obs = np.zeros(OBS_DIM, np.float32)
    fast.begin_episode(np.random.default_rng(11))
    n = 20_000
    counts = np.bincount([fast.act(obs, explore=True) for _ in range(n)], minlength=3)
    probs = torch.softmax(policy.net(torch.from_numpy(obs)), -1).detach().numpy()
    np.testing.assert_allclose(counts / n, probs, atol=float(5 * np.sqrt(0.25 / n)))
    assert fast.act(obs, explore=False) == 1


def test_set_flat_keeps_views_so_changing_theta_in_place_changes_the_action():
    policy, fast, theta = make_pair("box_asymmetric", "deterministic", hiddens=(8,))
    obs = random_obs(1)[0]
    before = fast.act(obs)
    theta[-3:] += 0.5  # the output bias (last in the flat order)
    after = fast.act(obs)
    assert np.all(after > before)
    policy.set_flat(theta)
    np.testing.assert_allclose(after, policy.act(obs), rtol=TOL, atol=TOL)
    assert fast.theta is theta


def test_set_flat_accepts_read_only_theta_and_copies_other_dtypes():
    policy, fast, theta = make_pair("box_asymmetric", "gaussian", hiddens=(8,))
    obs = random_obs(1)[0]
    frozen = theta.copy()
    frozen.setflags(write=False)  # as Ray's object store hands arrays out
    fast.set_flat(frozen)
    assert fast.theta is frozen
    np.testing.assert_allclose(fast.act(obs), policy.act(obs), rtol=TOL, atol=TOL)
    fast.set_flat(theta.astype(np.float64))  # converted: a float32 copy
    assert fast.theta.dtype == np.float32 and fast.theta.flags.c_contiguous
    np.testing.assert_allclose(fast.act(obs), policy.act(obs), rtol=TOL, atol=TOL)


def test_log_std_comes_first_in_the_flat_order():
    policy, fast, theta = make_pair("box_asymmetric", "gaussian", hiddens=(8,))
    assert next(iter(policy.named_parameters()))[0] == "log_std"
    theta = theta.copy()
    theta[:3] = np.log([0.1, 0.2, 0.3])
    fast.set_flat(theta)
    np.testing.assert_allclose(fast._gaussian_std, [0.1, 0.2, 0.3], rtol=1e-6)


def test_same_seed_same_actions_and_another_seed_other_actions():
    _, fast, _ = make_pair("box_asymmetric", "gaussian", hiddens=(16, 16))
    observations = random_obs(600)  # longer than a 256-step block

    def episode(seed):
        fast.begin_episode(np.random.default_rng(seed))
        return np.stack([fast.act(obs, explore=True) for obs in observations])

    first = episode(5)
    np.testing.assert_array_equal(episode(5), first)
    assert not np.allclose(episode(6), first)


def test_noise_is_drawn_lazily_only_for_explored_steps():
    _, fast, _ = make_pair("box_asymmetric", "gaussian", noise_block_steps=4)
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    fast.begin_episode(rng)
    assert fast.last_noise is None
    obs = random_obs(1)[0]
    fast.act(obs, explore=False)
    assert rng.bit_generator.state == state  # nothing drawn
    fast.act(obs, explore=True)
    np.testing.assert_array_equal(
        fast.last_noise, np.random.default_rng(0).standard_normal((4, 3), dtype=np.float32)[0]
    )


def test_actions_are_new_arrays():
    _, fast, _ = make_pair("box_asymmetric", "deterministic")
    obs = random_obs(2)
    a, b = fast.act(obs[0]), fast.act(obs[1])
    assert not np.shares_memory(a, b) and not np.array_equal(a, b)


def test_bad_use_gets_one_clear_error():
    _, fast, theta = make_pair("box_asymmetric", "gaussian")
    with pytest.raises(ValueError, match="shape"):
        fast.set_flat(theta[:-1])
    fresh = NumpyPolicy(MLPPolicy(OBS_DIM, SPACES["box_asymmetric"], hiddens=(8,), head="gaussian"))
    with pytest.raises(RuntimeError, match="begin_episode"):
        fresh.act(random_obs(1)[0], explore=True)
    with pytest.raises(ValueError, match="noise_block_steps"):
        NumpyPolicy(MLPPolicy(OBS_DIM, SPACES["discrete"]), noise_block_steps=0)


def test_a_network_it_has_no_twin_of_is_refused():
    policy = MLPPolicy(OBS_DIM, SPACES["discrete"], hiddens=(8,))
    policy.net = torch.nn.Sequential(policy.net[0], torch.nn.Sigmoid(), policy.net[2])
    with pytest.raises(TypeError, match="Sigmoid"):
        NumpyPolicy(policy)
    policy.net = torch.nn.Sequential(policy.net[0], torch.nn.Tanh())
    with pytest.raises(TypeError, match="end in a Linear"):
        NumpyPolicy(policy)
