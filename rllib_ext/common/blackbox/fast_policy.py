"""NumpyPolicy: the numpy inference twin of :class:`~rllib_ext.common.policies.MLPPolicy`.

The lean env runner calls the policy once per env step on one observation. For the small MLPs of
the black-box algorithms a torch forward costs 106–176 µs per step there, the same network in
numpy about a tenth of that (``benchmarks/policy_step.py``), while an env step costs 12 µs
(CartPole) to ~230 µs (Hopper). This class computes exactly what ``MLPPolicy.act`` computes, in
float32 like torch, with the same heads, activations, bounds and flat parameter order; the torch
module stays the one definition of the network (the structure and the θ layout are read from it).

Differences from ``MLPPolicy.act`` (none in the deterministic action):

- **Exploration noise is drawn per episode, in blocks**, from a ``numpy.random.Generator`` passed
  to :meth:`NumpyPolicy.begin_episode`, not by one ``torch.randn`` per step: a block holds the
  noise of ``noise_block_steps`` steps and a longer episode draws the next block from the same
  generator. The noise streams are therefore numpy's, not torch's: the same seed gives the same
  actions here, but not the actions ``MLPPolicy.act`` draws with a torch generator of that seed.
- **A Discrete stochastic head samples with the Gumbel-max trick**,
  ``argmax(logits + g)`` with ``g`` standard Gumbel, which is exactly a draw from
  ``softmax(logits)`` (Gumbel 1954; Maddison et al. 2014, "A* Sampling", §2) — one vector add and
  an argmax per step instead of a softmax, a cumulative sum and a search.
- Round-off: the products and sums are float32 as in torch but may be summed in another order, so
  the network outputs agree to float32 rounding (~1e-6 relative), not bit for bit; an argmax
  between two logits closer than that may differ.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from torch import nn

from rllib_ext.common.policies import DETERMINISTIC_HEADS, MLPPolicy

_F32 = np.float32
#: Paper 000 App. A.1: the variance output is clamped below by this (as ``MLPPolicy._mean_std``).
_MIN_VARIANCE = _F32(1e-12)


def _tanh(x: np.ndarray, scratch: np.ndarray) -> None:
    np.tanh(x, out=x)


def _relu(x: np.ndarray, scratch: np.ndarray) -> None:
    # A layer's scratch starts as zeros and only its own activation touches it: relu never writes
    # it, so it stays the zeros to compare with (an array operand is faster than a scalar one).
    np.maximum(x, scratch, out=x)


def _elu(x: np.ndarray, scratch: np.ndarray, alpha: float) -> None:
    # ELU(x) = max(x, 0) + α·expm1(min(x, 0)): equal to torch's x > 0 ? x : α·(eˣ − 1), and the
    # exponential never sees a positive argument (no overflow warnings for large x).
    np.minimum(x, _F32(0.0), out=scratch)
    np.expm1(scratch, out=scratch)
    if alpha != 1.0:
        scratch *= _F32(alpha)
    np.maximum(x, _F32(0.0), out=x)
    x += scratch


def _softsign(x: np.ndarray, scratch: np.ndarray) -> None:
    # Softsign(x) = x / (1 + |x|).
    np.abs(x, out=scratch)
    scratch += _F32(1.0)
    np.divide(x, scratch, out=x)


def _activation(module: nn.Module) -> Callable[[np.ndarray, np.ndarray], None]:
    """The in-place numpy twin ``f(x, scratch)`` of one torch activation module."""
    if isinstance(module, nn.Tanh):
        return _tanh
    if isinstance(module, nn.ReLU):
        return _relu
    if isinstance(module, nn.ELU):
        return functools.partial(_elu, alpha=float(module.alpha))
    if isinstance(module, nn.Softsign):
        return _softsign
    raise TypeError(f"NumpyPolicy has no numpy twin of the activation {type(module).__name__}")


class NumpyPolicy:
    """Numpy twin of an :class:`MLPPolicy` for single-observation inference in an episode loop.

    The structure (layer shapes, activation, head, action space, bounds) is copied from ``policy``
    at construction; the parameters come from a flat θ in ``MLPPolicy``'s order
    (``torch.nn.utils.parameters_to_vector(policy.parameters())``, in which ``log_std`` comes
    *first*: the module's own parameters precede those of its submodule ``net``). Construction
    adopts ``policy``'s current θ.

    Usage per episode::

        fast = NumpyPolicy(policy)
        fast.set_flat(theta)            # views into θ: no copy
        fast.begin_episode(rng)         # a numpy Generator: the episode's noise stream
        action = fast.act(obs, explore=True)

    Args:
        policy: The torch policy to mirror (its ``net`` is Linear, activation, ..., Linear).
        noise_block_steps: Steps of exploration noise drawn from the generator at once.

    Raises:
        TypeError: ``policy.net`` holds a layer or activation this class has no twin of.
        ValueError: ``noise_block_steps`` < 1.
    """

    def __init__(self, policy: MLPPolicy, noise_block_steps: int = 256):
        if noise_block_steps < 1:
            raise ValueError(f"noise_block_steps must be >= 1, got {noise_block_steps}")
        self.head: str = policy.head
        self.discrete: bool = policy.discrete
        self.action_dim: int = policy.action_dim
        self.noise_block_steps = int(noise_block_steps)
        # Flat layout, read from torch itself: name -> (start, stop, shape).
        self._layout: dict[str, tuple[int, int, tuple[int, ...]]] = {}
        start = 0
        for name, p in policy.named_parameters():
            self._layout[name] = (start, start + p.numel(), tuple(p.shape))
            start += p.numel()
        self.num_params = start
        # Layers: [weight name, bias name, activation or None (the output layer)].
        layers: list[list[Any]] = []  # [weight name, bias name, activation or None]
        for name, module in policy.net.named_children():
            if isinstance(module, nn.Linear):
                layers.append([f"net.{name}.weight", f"net.{name}.bias", None])
            elif layers and layers[-1][2] is None:
                layers[-1][2] = _activation(module)
            else:
                raise TypeError(f"NumpyPolicy expects Linear, activation, ..., Linear; got {policy.net}")
        if not layers or layers[-1][2] is not None:
            raise TypeError(f"NumpyPolicy expects the network to end in a Linear layer; got {policy.net}")
        self._layer_specs = []  # (weight name, bias name, activation, output buffer, scratch buffer)
        for w, b, act in layers:
            out = np.empty(self._layout[w][2][0], _F32)
            # Scratch starts as zeros: the relu twin relies on it (see _relu).
            self._layer_specs.append((w, b, act, out, np.zeros_like(out)))
        if not self.discrete:
            self._center = policy._center.detach().numpy().astype(_F32, copy=True)
            self._half = policy._half.detach().numpy().astype(_F32, copy=True)
            self._lo = np.full(self.action_dim, -1.0, _F32)
            self._hi = np.full(self.action_dim, 1.0, _F32)
            self._mean = np.empty(self.action_dim, _F32)  # mean + std·z in [-1, 1] units
            self._std = np.empty(self.action_dim, _F32)  # gaussian_2a: the step's std
        else:
            self._logits = np.empty(self.action_dim, np.float64)  # logits + Gumbel noise
        self._rng: np.random.Generator | None = None
        self._noise: np.ndarray | None = None
        self._noise_pos = self.noise_block_steps
        self.set_flat(policy.get_flat())

    def set_flat(self, theta: np.ndarray) -> None:
        """Adopts the flat parameter vector θ (``MLPPolicy.get_flat`` order).

        Weights, biases and ``log_std`` are *views* into θ when θ is a C-contiguous float32 array
        (read-only is fine: nothing writes to it), so changing θ in place changes the actions;
        any other θ is first converted to one (a copy). The ``gaussian`` head's std = exp(log_std)
        is computed here, once: after changing ``log_std`` in place, call ``set_flat`` again.

        Args:
            theta: Shape [num_params].

        Raises:
            ValueError: θ is not 1-d or has the wrong size.
        """
        theta = np.ascontiguousarray(theta, dtype=_F32)
        if theta.shape != (self.num_params,):
            raise ValueError(f"θ must have shape ({self.num_params},), got {theta.shape}")
        if theta is getattr(self, "theta", None) and "log_std" not in self._layout:
            return  # the same array (changed in place, or not at all): the views read it as it is now
        self.theta = theta

        def view(name: str) -> np.ndarray:
            start, stop, shape = self._layout[name]
            return theta[start:stop].reshape(shape)

        self._layers = [(view(w), view(b), out, act, scratch) for w, b, act, out, scratch in self._layer_specs]
        if "log_std" in self._layout:
            # paper 002 §4: a state-independent log-std parameter.
            self._gaussian_std = np.exp(view("log_std"))

    def begin_episode(self, rng: np.random.Generator) -> None:
        """Starts an episode's exploration noise stream; nothing is drawn until a step needs it.

        Args:
            rng: The episode's generator; noise is drawn from it in blocks of
                ``noise_block_steps`` steps (standard normals for a Box stochastic head, standard
                Gumbels for a Discrete one), the next block when an episode outlasts one.
        """
        self._rng = rng
        self._noise = None
        self._noise_pos = self.noise_block_steps

    @property
    def last_noise(self) -> np.ndarray | None:
        """A copy of the noise the last explored step used (None before any in this episode)."""
        if self._noise is None:
            return None
        last: np.ndarray = self._noise[self._noise_pos - 1].copy()
        return last

    def _next_noise(self) -> np.ndarray:
        pos = self._noise_pos
        if pos == self.noise_block_steps:
            if self._rng is None:
                raise RuntimeError("NumpyPolicy.act(explore=True) needs begin_episode(rng) first")
            shape = (self.noise_block_steps, self.action_dim)
            if self.discrete:
                self._noise = self._rng.gumbel(size=shape)
            else:
                self._noise = self._rng.standard_normal(shape, dtype=_F32)
            pos = 0
        self._noise_pos = pos + 1
        assert self._noise is not None  # drawn above or by an earlier step of this block
        row: np.ndarray = self._noise[pos]
        return row

    def forward(self, obs: np.ndarray) -> np.ndarray:
        """The network output (``MLPPolicy.net(obs)``) for one observation, as a new float32 array."""
        return self._forward(obs).copy()

    def _forward(self, obs: np.ndarray) -> np.ndarray:
        # The last layer's output buffer: valid until the next call.
        if type(obs) is not np.ndarray or obs.dtype != _F32:
            obs = np.asarray(obs, dtype=_F32)
        x = obs
        for w, b, out, act, scratch in self._layers:
            np.dot(w, x, out=out)
            out += b
            if act is not None:
                act(out, scratch)
            x = out
        return x

    def act(self, obs: np.ndarray, explore: bool = False) -> int | np.ndarray:
        """One action for one observation, as ``MLPPolicy.act`` computes it.

        Discrete: ``argmax`` of the logits, or with ``explore`` and a stochastic head a sample of
        their softmax. Box: ``center + half · clip(mean [+ std · z], −1, 1)`` with the head's mean
        and std (see ``MLPPolicy``) and ``z`` the step's standard normal noise (``explore`` and a
        stochastic head only).

        Args:
            obs: One observation, shape [obs_dim] (float32 avoids a conversion).
            explore: Sample from a stochastic head instead of acting with its mean.

        Returns:
            An int (Discrete) or a new float32 array of shape [action_dim] (Box).

        Raises:
            RuntimeError: ``explore`` with a stochastic head before :meth:`begin_episode`.
        """
        out = self._forward(obs)
        head = self.head
        if self.discrete:
            if explore and head not in DETERMINISTIC_HEADS:
                # Gumbel-max: argmax(logits + g) ~ Categorical(softmax(logits)).
                np.add(out, self._next_noise(), out=self._logits)
                return int(self._logits.argmax())
            return int(out.argmax())
        if head == "linear":
            mean = out
        else:
            np.tanh(out, out=out)
            mean = out if head != "gaussian_2a" else out[: self.action_dim]
        if explore and head not in DETERMINISTIC_HEADS:
            if head == "gaussian":
                std = self._gaussian_std
            else:
                # Paper 000 App. A.1: variance (t + 1) / 2 in [0, 1], clamped at 1e-12.
                std = self._std
                np.add(out[self.action_dim :], _F32(1.0), out=std)
                std /= _F32(2.0)
                np.maximum(std, _MIN_VARIANCE, out=std)
                np.sqrt(std, out=std)
            np.multiply(std, self._next_noise(), out=self._mean)
            self._mean += mean
            mean = self._mean
            np.maximum(mean, self._lo, out=mean)
            np.minimum(mean, self._hi, out=mean)
        elif head == "linear":
            np.maximum(mean, self._lo, out=mean)
            np.minimum(mean, self._hi, out=mean)
        # else: a tanh mean is in [-1, 1] already, where the clamp changes nothing.
        action: np.ndarray = np.multiply(self._half, mean)
        action += self._center
        return action
