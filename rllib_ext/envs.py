"""Environments shipped with rllib_ext: small ones for tests and benchmarks, and paper 004's Atari setup.

``rllib_ext/VariableLength-v0`` (:class:`VariableLengthEnv`) is a tiny task whose episodes vary in
length, which is what the asynchronous algorithms (DFD, AES-RL, IMPACT) are about: a synchronous
method waits for the longest episode of a batch. ``step_sleep_s`` stands in for an expensive
simulator so that benchmarks can run more env runners than there are cores.

``rllib_ext/StepCounted-v0`` (:func:`make_step_counted`) wraps any env in :class:`StepCounter`,
which counts its own ``step()`` calls into a file, so that the env steps a run reports can be
checked against those its envs simulated, across every process (the step-count audit test).

``rllib_ext/Atari42-v0`` (:func:`make_atari42`) is an ALE game as paper 004 §4.3 feeds it to its
network: four stacked 42x42 grey frames. It needs the ``atari`` extra (``ale-py``, whose wheel
ships the ROMs, and ``opencv-python-headless``, which RLlib's frame wrapper resizes with).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import gymnasium as gym
import numpy as np


class VariableLengthEnv(gym.Env):
    """Match-the-sign task with random episode lengths.

    Each step the observation holds a signal ``s ~ U(-1, 1)`` and the fraction of the episode
    elapsed. Discrete actions: reward 1 for action ``int(s > 0)``, else 0. Continuous actions
    (``continuous=True``, a 1-d Box in [-1, 1]): reward ``1 - |a - sign(s)| / 2``. The episode
    terminates after ``L ~ U{min_len, max_len}`` steps, drawn at reset from the env's RNG; the
    optimal return is therefore ``L`` and a random policy gets about ``L / 2``.

    Args:
        min_len: Shortest episode.
        max_len: Longest episode.
        continuous: Box actions instead of Discrete(2).
        step_sleep_s: Seconds to sleep in every ``step`` (a stand-in for an expensive simulator).
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        min_len: int = 5,
        max_len: int = 50,
        continuous: bool = False,
        step_sleep_s: float = 0.0,
        render_mode: str | None = None,
    ):
        if not 1 <= min_len <= max_len:
            raise ValueError(f"VariableLengthEnv needs 1 <= min_len <= max_len, got {min_len}, {max_len}")
        if step_sleep_s < 0:
            raise ValueError(f"VariableLengthEnv: step_sleep_s must be >= 0, got {step_sleep_s}")
        self.min_len, self.max_len = int(min_len), int(max_len)
        self.continuous = bool(continuous)
        self.step_sleep_s = float(step_sleep_s)
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(
            low=np.array([-1.0, 0.0], dtype=np.float32),
            high=np.array([1.0, 1.0], dtype=np.float32),
            dtype=np.float32,
        )
        if self.continuous:
            self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        else:
            self.action_space = gym.spaces.Discrete(2)
        self._signal = 0.0
        self._t = 0
        self._length = self.min_len

    def _obs(self) -> np.ndarray:
        return np.array([self._signal, self._t / self._length], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        self._length = int(self.np_random.integers(self.min_len, self.max_len + 1))
        self._t = 0
        self._signal = float(self.np_random.uniform(-1.0, 1.0))
        return self._obs(), {"episode_length": self._length}

    def step(self, action):
        if self.step_sleep_s:
            time.sleep(self.step_sleep_s)
        target = 1.0 if self._signal > 0 else -1.0
        if self.continuous:
            a = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], -1.0, 1.0))
            reward = 1.0 - abs(a - target) / 2.0
        else:
            reward = 1.0 if int(action) == int(target > 0) else 0.0
        self._t += 1
        self._signal = float(self.np_random.uniform(-1.0, 1.0))
        terminated = self._t >= self._length
        return self._obs(), reward, terminated, False, {}


class FaultyEnv(VariableLengthEnv):
    """:class:`VariableLengthEnv` that misbehaves on purpose, for recovery tests.

    At reset each episode is chosen to fail with probability ``fault_prob``; a failing episode
    injects ``fault`` at step ``fault_step`` (or its last step if shorter):
    ``"nan_obs"`` (a NaN observation), ``"inf_reward"``, ``"nan_reward"`` or ``"raise"``
    (``step`` raises RuntimeError).

    Args:
        fault: Which fault to inject.
        fault_prob: Probability that an episode fails.
        fault_step: Step index at which the fault appears.
        **kwargs: :class:`VariableLengthEnv` arguments.
    """

    FAULTS = ("nan_obs", "inf_reward", "nan_reward", "raise")

    def __init__(self, fault: str = "nan_obs", fault_prob: float = 0.5, fault_step: int = 2, **kwargs):
        if fault not in self.FAULTS:
            raise ValueError(f"FaultyEnv: unknown fault {fault!r}; valid: {', '.join(self.FAULTS)}")
        if not 0.0 <= fault_prob <= 1.0:
            raise ValueError(f"FaultyEnv: fault_prob must be in [0, 1], got {fault_prob}")
        super().__init__(**kwargs)
        self.fault, self.fault_prob, self.fault_step = fault, float(fault_prob), int(fault_step)
        self._failing = False

    def reset(self, *, seed: int | None = None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        self._failing = bool(self.np_random.random() < self.fault_prob)
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if self._failing and self._t - 1 == min(self.fault_step, self._length - 1):
            if self.fault == "raise":
                raise RuntimeError("FaultyEnv: injected failure in step()")
            if self.fault == "nan_obs":
                obs = np.full_like(obs, np.nan)
            elif self.fault == "inf_reward":
                reward = float("inf")
            else:
                reward = float("nan")
        return obs, reward, terminated, truncated, info


class StepCounter(gym.Wrapper):
    """Counts the wrapped env's ``step()`` calls into a file of its own under ``count_dir``.

    Each instance (in any process: env runners, the driver) writes its count, as 8 little-endian
    bytes, to ``<count_dir>/<pid>-<random>.steps`` before every step (a raising step counts);
    :meth:`total` sums the files. An audit of what a run reports, not for speed.
    """

    SUFFIX = ".steps"

    def __init__(self, env: gym.Env, count_dir: str):
        super().__init__(env)
        Path(count_dir).mkdir(parents=True, exist_ok=True)
        path = Path(count_dir) / f"{os.getpid()}-{uuid.uuid4().hex}{self.SUFFIX}"
        self._fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
        self.steps = 0
        os.pwrite(self._fd, self.steps.to_bytes(8, "little"), 0)

    def step(self, action):
        self.steps += 1
        os.pwrite(self._fd, self.steps.to_bytes(8, "little"), 0)
        return self.env.step(action)

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        super().close()

    @classmethod
    def total(cls, count_dir: str) -> int:
        """Every ``step()`` call counted under ``count_dir`` so far, by all instances."""
        return sum(int.from_bytes(p.read_bytes()[:8], "little") for p in Path(count_dir).glob("*" + cls.SUFFIX))


def make_step_counted(env: str = "rllib_ext/VariableLength-v0", count_dir: str = "", **env_kwargs) -> gym.Env:
    """``gym.make(env, **env_kwargs)`` wrapped in a :class:`StepCounter` writing under ``count_dir``."""
    if not count_dir:
        raise ValueError("rllib_ext/StepCounted-v0 needs `count_dir`, the folder its step counts go to")
    if env not in gym.registry and env.startswith("rllib_ext/"):  # a process that never imported rllib_ext
        from rllib_ext.registry import ENVS

        gym.register(env, entry_point=ENVS[env])
    return StepCounter(gym.make(env, **env_kwargs), count_dir)


#: How to get what ``rllib_ext/Atari42-v0`` needs beyond the base install.
ATARI_INSTALL_HINT = "pip install 'rllib-ext[atari]' (from a checkout: pip install -e '.[atari]')"


def _import_ale_py():
    """``ale_py`` with its games registered in gymnasium, or an ImportError saying what to install."""
    try:
        import ale_py
    except ImportError as e:
        raise ImportError(
            f"rllib_ext/Atari42-v0 needs the ale-py package (the Atari emulator; its wheel ships the ROMs): "
            f"{ATARI_INSTALL_HINT}"
        ) from e
    try:
        import cv2  # noqa: F401 - RLlib's WarpFrame grey-scales and resizes with OpenCV
    except ImportError as e:
        raise ImportError(
            "rllib_ext/Atari42-v0 needs OpenCV (opencv-python-headless) for RLlib's frame resizing: "
            f"{ATARI_INSTALL_HINT}"
        ) from e
    gym.register_envs(ale_py)
    return ale_py


def make_atari42(
    game: str = "ALE/Pong-v5",
    dim: int = 42,
    framestack: int = 4,
    repeat_action_probability: float = 0.0,
    **ale_kwargs,
) -> gym.Env:
    """An ALE game as paper 004 §4.3's Atari runs see it: a stack of four 42x42 grey frames.

    The ALE env is made with ``frameskip=1``; RLlib's ``wrap_atari_for_new_api_stack`` (the
    new-stack version of the DeepMind wrappers the authors' RLlib used) then repeats each action
    on 4 frames and keeps the max of the last two, grey-scales and resizes to ``dim`` x ``dim``,
    scales pixels to [-1, 1], starts with up to 30 no-ops, presses FIRE where the game needs it,
    ends an episode at each lost life and stacks the last ``framestack`` frames:
    observations are ``Box(-1, 1, (dim, dim, framestack), float32)``. Rewards are not clipped
    here (``clip_rewards`` in the algorithm's config does that for training only, so that the
    reported returns are the game's).

    Args:
        game: A gymnasium id of an ALE game, e.g. ``"ALE/Pong-v5"``.
        dim: Side of the square grey frames (42 in the paper).
        framestack: Frames stacked per observation (4 in the paper).
        repeat_action_probability: ALE's sticky actions. 0.0 (the ``NoFrameskip-v4`` games
            the paper's RLlib ran, and RLlib's Atari examples); ALE v5's own default is 0.25.
        **ale_kwargs: Further arguments of the ALE env (``full_action_space``, ``mode``, ...).
            ``frameskip`` may only be 1: the wrapper does the skipping.

    Raises:
        ImportError: Without ``ale-py`` or OpenCV (the ``atari`` extra).
        ValueError: For a bad argument.
    """
    if not isinstance(game, str) or not game:
        raise ValueError(f"rllib_ext/Atari42-v0: `game` must be an ALE gymnasium id (e.g. 'ALE/Pong-v5'), got {game!r}")
    for name, value in (("dim", dim), ("framestack", framestack)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"rllib_ext/Atari42-v0: `{name}` must be an integer >= 1, got {value!r}")
    if ale_kwargs.get("frameskip", 1) != 1:
        raise ValueError(
            f"rllib_ext/Atari42-v0: `frameskip` must be 1 (got {ale_kwargs['frameskip']!r}): RLlib's wrapper "
            "repeats each action on 4 frames itself"
        )
    _import_ale_py()
    from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack

    ale_kwargs["frameskip"] = 1
    env = gym.make(game, repeat_action_probability=repeat_action_probability, **ale_kwargs)
    return wrap_atari_for_new_api_stack(env, dim=dim, framestack=framestack)
