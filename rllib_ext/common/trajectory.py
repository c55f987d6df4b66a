"""Env wrappers that record an episode and add exploration (CV-ES's gradients, AES-RL's replay).

- :class:`TrajectoryRecorder` keeps the observations, actions, rewards and the termination flag
  of the current episode; :meth:`TrajectoryRecorder.transitions` turns them into replay
  transitions (s, a, r, s', terminated).
- :class:`ActionExploration` perturbs the policy's Box action before the env sees it: Gaussian
  noise a ← clip(a + a_noise·h·N(0, I), low, high) with h the action half-range (paper 001
  Algorithm 2; h = 1 for its [−1, 1] MuJoCo actions), or uniform random actions (the
  ``initial_steps`` of TD3 and AES-RL). Put it *outside* the recorder so the recorder sees the
  action the env received.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np


class TrajectoryRecorder(gym.Wrapper[Any, Any, Any, Any]):
    """Keeps the observations, actions and rewards of the current episode (reset clears them).

    Attributes:
        observations: o_0 … o_T (the reset observation and every step's).
        actions: a_0 … a_{T−1} as passed to ``step``.
        rewards: r_0 … r_{T−1}.
        terminated: Whether the last step ended the episode by termination (not truncation).
    """

    def __init__(self, env: gym.Env[Any, Any]):
        super().__init__(env)
        self.observations: list[np.ndarray] = []
        self.actions: list[Any] = []
        self.rewards: list[float] = []
        self.terminated = False

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self.observations, self.actions, self.rewards, self.terminated = [obs], [], [], False
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.actions.append(np.array(action, copy=True))
        self.rewards.append(float(reward))
        self.observations.append(obs)
        self.terminated = bool(terminated)
        return obs, reward, terminated, truncated, info

    def transitions(self) -> dict[str, np.ndarray]:
        """The episode as float32 arrays ``obs, actions, rewards, next_obs, terminateds`` [T, ...]."""
        steps = len(self.rewards)
        obs = np.asarray(self.observations, dtype=np.float32)
        terminateds = np.zeros(steps, dtype=np.float32)
        if steps and self.terminated:
            terminateds[-1] = 1.0
        return {
            "obs": obs[:steps],
            "actions": np.asarray(self.actions, dtype=np.float32).reshape(steps, -1),
            "rewards": np.asarray(self.rewards, dtype=np.float32),
            "next_obs": obs[1 : steps + 1],
            "terminateds": terminateds,
        }


class ActionExploration(gym.ActionWrapper[Any, np.ndarray, Any]):
    """Gaussian action noise or uniform random actions for a 1-d Box action space.

    Attributes (set between episodes):
        noise: a_noise, the noise scale in half-range units (0 disables it).
        random_actions: Replace the policy's action by a uniform sample of the action space.
    """

    def __init__(self, env: gym.Env[Any, Any], noise: float = 0.0, seed: int | None = None):
        super().__init__(env)
        space = env.action_space
        if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1):
            raise ValueError(f"ActionExploration needs a 1-d Box action space, got {space}")
        self.noise, self.random_actions = float(noise), False
        self._low, self._high = space.low.astype(np.float32), space.high.astype(np.float32)
        self._half = np.where(np.isfinite(self._high - self._low), (self._high - self._low) / 2, 1.0).astype(np.float32)
        self._rng = np.random.default_rng(seed)

    def action(self, action: Any) -> np.ndarray:
        if self.random_actions:
            return self._rng.uniform(self._low, self._high).astype(np.float32)
        a = np.asarray(action, dtype=np.float32)
        if self.noise > 0:
            a = a + self.noise * self._half * self._rng.standard_normal(a.shape, dtype=np.float32)
        return np.clip(a, self._low, self._high)
