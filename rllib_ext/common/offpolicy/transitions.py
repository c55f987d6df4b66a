"""A uniform transition replay buffer for TD3 (Fujimoto et al. 2018) and the methods of paper 001.

:class:`TransitionBuffer` is a FIFO ring of (s, a, r, s', terminated) transitions in
preallocated numpy arrays, sampled uniformly with replacement (TD3's buffer; paper 001 App. C
uses a capacity of 2e5). :meth:`TransitionBuffer.sample` can draw several minibatches in one
call (``num_batches``), so that a learner in another process pays one round trip for many
gradient steps. RLlib 2.60's ``EpisodeReplayBuffer`` samples episode chunks and has no replay
actor; this flat buffer is what the AES-RL critic worker, its actors and TD3_EXT share.

:data:`ReplayActor` is the same class as a Ray actor (``ray.remote(num_cpus=0)``): evaluation
workers ``add`` to it, the critic worker ``sample``\\ s from it, from any process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, cast

import numpy as np
import numpy.typing as npt
import ray

from rllib_ext.common.waits import RemoteMethod, get_within

__all__ = ["ReplayActor", "ReplayHandle", "TransitionBuffer", "replay_actor", "sample_chunks", "writable"]

#: The stored fields, in :meth:`TransitionBuffer.add`'s argument order.
FIELDS = ("obs", "actions", "rewards", "next_obs", "terminateds")


class TransitionBuffer:
    """FIFO ring buffer of transitions with uniform sampling (see the module docstring).

    Args:
        capacity: Maximal number of stored transitions; the oldest are overwritten.
        obs_dim: Flattened observation size.
        act_dim: Action size.
        seed: Seed of the sampler.

    Attributes:
        num_added: Transitions added over the buffer's lifetime (including overwritten ones).
    """

    def __init__(self, capacity: int, obs_dim: int, act_dim: int, seed: int | None = None):
        for name, value, low in (("capacity", capacity, 1), ("obs_dim", obs_dim, 1), ("act_dim", act_dim, 1)):
            if not _is_int(value) or value < low:
                raise ValueError(f"TransitionBuffer: `{name}` must be an integer >= {low}, got {value!r}")
        self.capacity, self.obs_dim, self.act_dim = int(capacity), int(obs_dim), int(act_dim)
        self._data = {
            "obs": np.zeros((self.capacity, self.obs_dim), np.float32),
            "actions": np.zeros((self.capacity, self.act_dim), np.float32),
            "rewards": np.zeros((self.capacity,), np.float32),
            "next_obs": np.zeros((self.capacity, self.obs_dim), np.float32),
            "terminateds": np.zeros((self.capacity,), np.float32),
        }
        self._pos = 0  # next write index
        self._size = 0
        self.num_added = 0
        self._rng = np.random.default_rng(seed)

    def add(
        self,
        obs: npt.ArrayLike,
        actions: npt.ArrayLike,
        rewards: npt.ArrayLike,
        next_obs: npt.ArrayLike,
        terminateds: npt.ArrayLike,
    ) -> int:
        """Appends n transitions (arrays with leading dimension n); overwrites the oldest.

        Args:
            obs: [n, obs_dim] (or [n, *obs_shape], flattened).
            actions: [n, act_dim].
            rewards: [n].
            next_obs: [n, obs_dim] (or [n, *obs_shape]).
            terminateds: [n], true/1.0 where s' is terminal (not for truncation).

        Returns:
            The number of stored transitions after the add.
        """
        rewards = np.asarray(rewards, np.float32).reshape(-1)
        n = rewards.shape[0]
        cols = {
            "obs": _rows(obs, n, self.obs_dim, "obs"),
            "actions": _rows(actions, n, self.act_dim, "actions"),
            "rewards": rewards,
            "next_obs": _rows(next_obs, n, self.obs_dim, "next_obs"),
            "terminateds": _rows(terminateds, n, None, "terminateds"),
        }
        if n == 0:
            return self._size
        self.num_added += n
        if n >= self.capacity:  # only the newest `capacity` survive
            for k, v in cols.items():
                self._data[k][:] = v[n - self.capacity :]
            self._pos, self._size = 0, self.capacity
            return self._size
        idx = (self._pos + np.arange(n)) % self.capacity
        for k, v in cols.items():
            self._data[k][idx] = v
        self._pos = (self._pos + n) % self.capacity
        self._size = min(self._size + n, self.capacity)
        return self._size

    def sample(self, batch_size: int, num_batches: int = 1, fields: tuple[str, ...] = FIELDS) -> dict[str, np.ndarray]:
        """Uniform samples with replacement.

        Args:
            batch_size: Transitions per minibatch.
            num_batches: Minibatches drawn at once.
            fields: The fields returned (e.g. ``("obs",)`` for an actor step); the draw is the same
                whichever are asked for.

        Returns:
            ``obs`` [num_batches, batch_size, obs_dim], ``actions`` [.., act_dim], ``rewards``
            [num_batches, batch_size], ``next_obs`` [.., obs_dim], ``terminateds``
            [num_batches, batch_size]; float32; those of ``fields``.

        Raises:
            ValueError: For non-positive sizes, an unknown field or an empty buffer.
        """
        for name, value in (("batch_size", batch_size), ("num_batches", num_batches)):
            if not _is_int(value) or value < 1:
                raise ValueError(f"TransitionBuffer.sample: `{name}` must be an integer >= 1, got {value!r}")
        unknown = [f for f in fields if f not in self._data]
        if unknown or not fields:
            raise ValueError(f"TransitionBuffer.sample: `fields` must name some of {FIELDS}, got {fields!r}")
        if self._size == 0:
            raise ValueError("TransitionBuffer.sample: the buffer is empty")
        idx = self._rng.integers(0, self._size, size=(int(num_batches), int(batch_size)))
        return {k: self._data[k][idx] for k in fields}

    def size(self) -> int:
        """The number of stored transitions."""
        return self._size

    def __len__(self) -> int:
        return self._size

    def get_state(self) -> dict[str, Any]:
        """Contents (the stored rows, oldest first), counters and the sampler's RNG state."""
        order = (self._pos - self._size + np.arange(self._size)) % self.capacity
        return {
            "capacity": self.capacity,
            "obs_dim": self.obs_dim,
            "act_dim": self.act_dim,
            "data": {k: v[order].copy() for k, v in self._data.items()},
            "num_added": self.num_added,
            "rng": self._rng.bit_generator.state,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`get_state`'s output; a smaller capacity keeps the newest rows."""
        if int(state["obs_dim"]) != self.obs_dim or int(state["act_dim"]) != self.act_dim:
            raise ValueError(
                f"TransitionBuffer.set_state: state has obs_dim {state['obs_dim']}, act_dim {state['act_dim']}; "
                f"this buffer has {self.obs_dim}, {self.act_dim}"
            )
        for v in self._data.values():
            v[:] = 0
        self._pos = self._size = 0
        data = state["data"]
        self.add(*(data[k] for k in FIELDS))
        self.num_added = int(state["num_added"])
        self._rng.bit_generator.state = state["rng"]


#: :class:`TransitionBuffer` as a Ray actor taking no CPU of its own.
ReplayActor = ray.remote(num_cpus=0)(TransitionBuffer)


class ReplayHandle(Protocol):
    """A :data:`ReplayActor`'s handle: :class:`TransitionBuffer`'s methods, called with ``.remote``."""

    @property
    def add(self) -> RemoteMethod[int]: ...
    @property
    def sample(self) -> RemoteMethod[dict[str, np.ndarray]]: ...
    @property
    def size(self) -> RemoteMethod[int]: ...
    @property
    def get_state(self) -> RemoteMethod[dict[str, Any]]: ...
    @property
    def set_state(self) -> RemoteMethod[None]: ...


def replay_actor(capacity: int, obs_dim: int, act_dim: int, seed: int | None = None) -> ReplayHandle:
    """A new :data:`ReplayActor` (:class:`TransitionBuffer`'s arguments), typed as its handle."""
    return cast(ReplayHandle, ReplayActor.remote(capacity, obs_dim, act_dim, seed))


def sample_chunks(
    replay: ReplayHandle, batch_size: int, steps: int, chunk: int, fields: tuple[str, ...] = FIELDS
) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """``steps`` minibatches from a replay actor, as ``(n, writable [n, batch_size, ...] arrays)``
    chunks of at most ``chunk``; the next chunk's sample call is in flight while the caller trains
    on the current one, so its round trip is hidden behind that work. The calls (sizes, order) are
    those of fetching each chunk when needed; none is made beyond ``steps``.

    Raises:
        ray.exceptions.RayError: From the replay actor (e.g. it died), when the chunk is fetched.
    """
    sizes = [min(chunk, steps - done) for done in range(0, max(int(steps), 0), int(chunk))]
    pending = replay.sample.remote(batch_size, num_batches=sizes[0], fields=fields) if sizes else None
    for i, n in enumerate(sizes):
        data = get_within(pending, "a replay actor's sample call")
        if i + 1 < len(sizes):
            pending = replay.sample.remote(batch_size, num_batches=sizes[i + 1], fields=fields)
        yield n, writable(data)


def writable(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Writable copies of a sample fetched from the replay actor (object-store arrays are
    read-only, and torch warns when wrapping them)."""
    return {k: np.array(v) for k, v in data.items()}


def _is_int(x: object) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _rows(x: npt.ArrayLike, n: int, dim: int | None, name: str) -> np.ndarray:
    """``x`` as float32 [n, dim] ([n] for dim None); ValueError naming ``name`` otherwise."""
    a = np.asarray(x, np.float32)
    shape = (n,) if dim is None else (n, dim)
    if a.ndim >= 1 and a.shape[0] == n and a.size == int(np.prod(shape)):
        return a.reshape(shape)
    want = f"[{n}]" if dim is None else f"[{n}, {dim}]"
    raise ValueError(f"TransitionBuffer.add: `{name}` has shape {a.shape}, expected {want}")
