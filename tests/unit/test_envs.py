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


# ------------------------------------------------------------------------------------------------
# rllib_ext/Atari42-v0: paper 004 §4.3's Atari input (needs the `atari` extra; skipped without it).
# ------------------------------------------------------------------------------------------------
ATARI42 = "rllib_ext/Atari42-v0"


def _atari_extra():
    pytest.importorskip("ale_py", reason=f"{ATARI42} needs the `atari` extra: pip install -e '.[atari]'")
    pytest.importorskip("cv2", reason=f"{ATARI42} needs the `atari` extra: pip install -e '.[atari]'")


def test_atari42_gives_four_stacked_42x42_grey_frames():
    _atari_extra()
    env = gym.make(ATARI42, game="ALE/Pong-v5")
    try:
        assert env.observation_space == gym.spaces.Box(-1.0, 1.0, (42, 42, 4), np.float32)
        assert env.action_space == gym.spaces.Discrete(6)
        obs, _ = env.reset(seed=0)
        assert obs.shape == (42, 42, 4) and obs.dtype == np.float32 and env.observation_space.contains(obs)
        env.action_space.seed(0)
        for _ in range(40):
            previous = obs
            obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            assert obs.shape == (42, 42, 4) and env.observation_space.contains(obs)
            # Each step shifts the stack by one frame: the 3 newest frames of the last
            # observation are the 3 oldest of this one.
            np.testing.assert_array_equal(obs[..., :3], previous[..., 1:])
            assert reward in (-1.0, 0.0, 1.0) and not (terminated or truncated)
        assert obs.std() > 0  # a picture, not a blank screen
    finally:
        env.close()


def test_atari42_through_tunes_creator_as_rllibs_env_runners_call_it():
    """The creator RLlib's env runners get from Tune's registry (env_config as an EnvContext,
    with the `num_envs` key RLlib adds): the ALE env is made with frameskip 1 and no sticky actions."""
    _atari_extra()
    from ray.rllib.env.env_context import EnvContext
    from ray.tune.registry import ENV_CREATOR, _global_registry

    creator = _global_registry.get(ENV_CREATOR, ATARI42)
    env = creator(EnvContext({"game": "ALE/Pong-v5", "num_envs": 1}, worker_index=1, num_workers=1))
    try:
        assert env.observation_space.shape == (42, 42, 4)
        ale = env.unwrapped
        assert ale._frameskip == 1  # the wrapper repeats each action on 4 frames
        assert ale.ale.getFloat("repeat_action_probability") == 0.0
    finally:
        env.close()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"frameskip": 4}, "frameskip"),
        ({"dim": 0}, "dim"),
        ({"framestack": 0}, "framestack"),
        ({"framestack": 2.5}, "framestack"),
        ({"game": ""}, "game"),
    ],
)
def test_atari42_rejects_bad_arguments(kwargs, match):
    """Checked before ale-py is imported: one ValueError naming the argument."""
    from rllib_ext.envs import make_atari42

    with pytest.raises(ValueError, match=match):
        make_atari42(**kwargs)


@pytest.mark.parametrize("module,package", [("ale_py", "ale-py"), ("cv2", "opencv-python-headless")])
def test_atari42_without_the_atari_extra_names_what_to_install(monkeypatch, module, package):
    import sys

    from rllib_ext.envs import make_atari42

    monkeypatch.setitem(sys.modules, module, None)  # `import module` raises ImportError
    with pytest.raises(ImportError, match=package) as info:
        make_atari42()
    assert "[atari]" in str(info.value)
