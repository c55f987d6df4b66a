"""The variable-episode-length env shipped for tests and benchmarks."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import rllib_ext  # noqa: F401 - registers rllib_ext/VariableLength-v0


@pytest.mark.parametrize("continuous", [False, True])
def test_passes_gymnasium_env_checker(variable_length_env, continuous):
    env = gym.make(variable_length_env, continuous=continuous)
    check_env(env.unwrapped, skip_render_check=True)


def _run_episode(env, policy, seed=None):
    obs, info = env.reset(seed=seed)
    total, steps, done = 0.0, 0, False
    while not done:
        obs, r, terminated, truncated, _ = env.step(policy(obs))
        total += r
        steps += 1
        done = terminated or truncated
    return total, steps, info["episode_length"]


def test_episode_lengths_vary_within_bounds_and_optimal_return_is_length(variable_length_env):
    env = gym.make(variable_length_env, min_len=3, max_len=12)
    env.reset(seed=0)
    lengths = []
    for _ in range(200):
        ret, steps, drawn = _run_episode(env, lambda o: int(o[0] > 0))
        assert steps == drawn
        assert ret == steps  # the sign-matching policy is optimal: reward 1 per step
        lengths.append(steps)
    assert min(lengths) == 3 and max(lengths) == 12
    assert len(set(lengths)) == 10


def test_random_policy_gets_about_half(variable_length_env):
    env = gym.make(variable_length_env, min_len=50, max_len=50)
    env.reset(seed=1)
    env.action_space.seed(1)
    rets = [_run_episode(env, lambda o: env.action_space.sample())[0] for _ in range(40)]
    assert abs(np.mean(rets) - 25.0) < 2.5


def test_continuous_reward_is_one_for_the_sign_and_zero_for_its_opposite(variable_length_env):
    env = gym.make(variable_length_env, continuous=True, min_len=20, max_len=20)
    ret, _, _ = _run_episode(env, lambda o: np.array([1.0 if o[0] > 0 else -1.0], np.float32), seed=2)
    assert ret == pytest.approx(20.0)
    ret, _, _ = _run_episode(env, lambda o: np.array([-1.0 if o[0] > 0 else 1.0], np.float32), seed=2)
    assert ret == pytest.approx(0.0)


def test_seeded_resets_are_reproducible(variable_length_env):
    a, b = gym.make(variable_length_env), gym.make(variable_length_env)
    assert [_run_episode(a, lambda o: 0, seed=7)[2] for _ in range(1)] == [
        _run_episode(b, lambda o: 0, seed=7)[2] for _ in range(1)
    ]


@pytest.mark.parametrize("kwargs", [dict(min_len=0), dict(min_len=5, max_len=4), dict(step_sleep_s=-1)])
def test_invalid_arguments_raise(variable_length_env, kwargs):
    with pytest.raises(ValueError, match="VariableLengthEnv"):
        gym.make(variable_length_env, **kwargs)
