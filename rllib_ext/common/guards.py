"""Run-time guards shared by every rllib_ext algorithm: never train on, or publish, NaN.

* :class:`FiniteParametersGuard`: an Algorithm mixin. After every training iteration it checks
  that every learner's module parameters are finite and otherwise fails the iteration with a
  ``FloatingPointError`` naming the algorithm, module and parameter.
  :func:`assert_finite_learner_parameters` is the same check, for algorithms to call right
  before they publish learner weights to the env runners.
* :class:`FiniteSingleAgentEnvRunner`: RLlib's ``SingleAgentEnvRunner`` whose env reports a
  NaN/inf observation or reward as a failed env step. RLlib then handles it as it handles an
  env that raises (``restart_failed_sub_environments``): the step failure is logged and counted
  (``env_runners/num_env_step_failures``), the env is recreated and the unfinished episode is
  dropped, so no NaN reaches a train batch. RLlib itself does not look at the values.
  :class:`FiniteMultiAgentEnvRunner` is the same for RLlib's ``MultiAgentEnvRunner``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
import tree
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.core.learner.learner import Learner
from ray.rllib.env.env_errors import StepFailedRecreateEnvError
from ray.rllib.env.env_runner import EnvRunner
from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.utils.annotations import override

from rllib_ext.common.steps import NUM_ENV_STEPS_DROPPED, NUM_ENV_STEPS_DROPPED_LIFETIME
from rllib_ext.common.validation import algo_name

logger = logging.getLogger(__name__)

# The mixins below are typed as what they are mixed into; at run time they stay plain classes.
if TYPE_CHECKING:
    _AlgorithmBase = Algorithm
    _EnvRunnerBase = EnvRunner
else:
    _AlgorithmBase = _EnvRunnerBase = object


# ---------------------------------------------------------------------------------------------
# Parameters.
# ---------------------------------------------------------------------------------------------
def nonfinite_parameters(module: torch.nn.Module) -> list[str]:
    """Names of the parameters of ``module`` holding a NaN or ±inf (one sync in the common case)."""
    params = list(module.named_parameters())
    if not params:
        return []
    finite = torch.stack([torch.isfinite(p.detach()).all() for _, p in params])
    if bool(finite.all()):
        return []
    return [name for (name, _), ok in zip(params, finite.tolist(), strict=True) if not ok]


def learner_nonfinite_parameters(learner: Learner) -> dict[str, list[str]]:
    """{module id: non-finite parameter names} of a Learner's modules (runs where the Learner is)."""
    out: dict[str, list[str]] = {}
    for module_id in learner.module.keys():
        module = learner.module[module_id]
        bad = nonfinite_parameters(module) if isinstance(module, torch.nn.Module) else []
        if bad:
            out[module_id] = bad
    return out


def assert_finite_learner_parameters(algo: Algorithm, when: str = "after the training iteration") -> None:
    """Raises FloatingPointError if any learner of ``algo`` holds a non-finite parameter.

    Args:
        algo: The algorithm (its ``learner_group`` is checked, local or remote Learners).
        when: Where in the loop the check runs, for the message.

    Raises:
        FloatingPointError: Naming the algorithm, the module and its non-finite parameters.
    """
    bad: dict[str, list[str]] = {}
    assert algo.learner_group is not None, "the algorithm has no learners to check"
    # Ray annotates `func` as (Learner, Any) -> T; it calls func(learner, **kwargs).
    for result in algo.learner_group.foreach_learner(learner_nonfinite_parameters):  # type: ignore[arg-type]
        for module_id, names in result.get().items():
            known = bad.setdefault(module_id, [])
            known += [n for n in names if n not in known]
    if bad:
        where = "; ".join(f"module {mid!r}: parameter(s) {', '.join(map(repr, names))}" for mid, names in bad.items())
        raise FloatingPointError(
            f"{algo_name(algo)}: non-finite (NaN/inf) weights {when} — {where}. The iteration fails "
            "instead of publishing them to the env runners; lower the learning rate (or clip "
            "gradients), check the env's observations and rewards, and restore the last checkpoint."
        )


def nonfinite_state_entries(state: Any, prefix: str = "") -> list[str]:
    """Paths ("module/param") of the floating-point arrays in a nested state dict that hold a
    NaN or ±inf (e.g. a learner's ``get_state`` weights snapshot)."""
    if isinstance(state, dict):
        return [bad for k, v in state.items() for bad in nonfinite_state_entries(v, f"{prefix}{k}/")]
    arr = np.asarray(state) if isinstance(state, (np.ndarray, torch.Tensor, float)) else None
    if arr is not None and arr.dtype.kind in "fc" and not np.isfinite(arr).all():
        return [prefix.rstrip("/")]
    return []


class FiniteParametersGuard(_AlgorithmBase):
    """Algorithm mixin: every training iteration ends with :func:`assert_finite_learner_parameters`.

    Put it first among the bases: ``class IMPACT(FiniteParametersGuard, APPO)``. An algorithm
    whose learners update in their own threads holds them first (:meth:`hold_learners`), so
    the check never reads weights in the middle of an optimizer step.
    """

    def hold_learners(self) -> None:
        """Stops every learner-side update that could run during the check (none by default)."""

    @override(Algorithm)
    def step(self) -> dict[str, Any]:
        results = super().step()
        self.hold_learners()
        assert_finite_learner_parameters(self)
        return results


# ---------------------------------------------------------------------------------------------
# Env values.
# ---------------------------------------------------------------------------------------------
class NonFiniteEnvStepError(StepFailedRecreateEnvError):
    """The env returned a NaN/inf observation or reward (RLlib recreates the env, drops the episode)."""


def _numeric_leaves(value: Any) -> Iterator[Any]:
    """The leaves of a nested structure, looking into object arrays (a multi-agent vector env
    returns its rewards as an object array of per-agent dicts)."""
    for leaf in tree.flatten(value):
        if isinstance(leaf, np.ndarray) and leaf.dtype == object:
            for item in leaf.ravel():
                yield from _numeric_leaves(item)
        else:
            yield leaf


def _first_nonfinite(what: str, value: Any) -> str | None:
    for leaf in _numeric_leaves(value):
        arr = np.asarray(leaf)
        if arr.dtype.kind in "fc" and not np.isfinite(arr).all():
            return f"non-finite {what}: {arr.tolist() if arr.size <= 8 else arr.shape}"
    return None


def raise_if_nonfinite(where: str, obs: Any, rewards: Any = None) -> None:
    """Raises :class:`NonFiniteEnvStepError` (after a warning) for a NaN/inf observation or reward."""
    problem = _first_nonfinite("observation", obs) or (
        _first_nonfinite("reward", rewards) if rewards is not None else None
    )
    if problem:
        logger.warning("rllib_ext: env %s returned a %s; dropping the episode and recreating the env", where, problem)
        raise NonFiniteEnvStepError(f"env {where} returned a {problem}")


class StepTally:
    """Env steps a runner's sub-envs took (``taken``), kept across env recreations."""

    __slots__ = ("taken",)

    def __init__(self) -> None:
        self.taken = 0


class FiniteValuesWrapper(gym.vector.VectorWrapper):
    """Raises :class:`NonFiniteEnvStepError` for a NaN/inf observation (reset, step) or reward.

    With a ``tally`` it also counts the sub-env steps each ``step()`` takes, before it takes them
    (so a step that fails counts): every sub-env but those whose episode ended on the previous
    step, which gymnasium's next-step autoreset resets instead of stepping.
    """

    def __init__(self, env: gym.vector.VectorEnv[Any, Any, Any], tally: StepTally | None = None):
        super().__init__(env)
        self.tally = tally
        self._ended = np.zeros(self.num_envs, dtype=bool)

    @override(gym.vector.VectorWrapper)
    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        # gymnasium annotates VectorWrapper.reset's seed as int | list[int], VectorEnv.reset's as int.
        obs, infos = self.env.reset(seed=seed, options=options)  # type: ignore[arg-type]
        self._ended[:] = False
        raise_if_nonfinite("reset()", obs)
        return obs, infos

    @override(gym.vector.VectorWrapper)
    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        if self.tally is not None:
            self.tally.taken += int(self.num_envs - self._ended.sum())
        obs, rewards, terminateds, truncateds, infos = self.env.step(actions)
        self._ended = np.logical_or(terminateds, truncateds)
        raise_if_nonfinite("step()", obs, rewards)
        return obs, rewards, terminateds, truncateds, infos


# Seed offset per env recreation (runner seeds are config.seed + worker index: no collisions).
_RECREATED_ENV_SEED_STRIDE = 10_007


class _FiniteEnvRunnerMixin(_EnvRunnerBase):
    """What the single- and multi-agent guarded runners share (put it first among the bases).

    Use with ``restart_failed_sub_environments=True`` (the default of the rllib_ext configs that
    use these runners): a non-finite value then costs the episode, not the runner.

    Two loops of RLlib 2.60 become errors or progress here:

    * a recreated env is reset with the runner's seed again, so a seeded run of a deterministic
      env replays the failing episode forever; each recreation moves the seed on
      (deterministically);
    * an env that fails in every episode makes ``sample()`` retry forever; after
      :attr:`max_failed_steps_in_a_row` failed steps without a finished episode ``sample()``
      raises instead (the runner fails; RLlib restarts a remote one).
    """

    #: Failed env steps (raise, NaN/inf) without a finished episode in between before giving up.
    max_failed_steps_in_a_row = 100
    _failed_steps_in_a_row = 0

    def _guard_env(self) -> None:
        """Makes ``self.env`` raise :class:`NonFiniteEnvStepError` on a NaN/inf value."""
        raise NotImplementedError

    @staticmethod
    def _episode_ended(terminateds: Any, truncateds: Any) -> bool:
        raise NotImplementedError

    def make_env(self) -> None:
        recreated = self.env is not None
        super().make_env()  # type: ignore[no-untyped-call]  # RLlib's EnvRunner.make_env is unannotated
        self._guard_env()
        if recreated and self._seed is not None:
            self._seed += _RECREATED_ENV_SEED_STRIDE

    def _try_env_step(self, actions: Any) -> Any:
        results = super()._try_env_step(actions)  # type: ignore[no-untyped-call]  # unannotated in RLlib
        if isinstance(results, str):  # RLlib's ENV_STEP_FAILURE: the env was recreated
            self._failed_steps_in_a_row += 1
            if self._failed_steps_in_a_row > self.max_failed_steps_in_a_row:
                raise RuntimeError(
                    f"rllib_ext: the env keeps failing: {self._failed_steps_in_a_row} failed env steps "
                    "(exceptions or NaN/inf values, see the log) without one finished episode"
                )
        elif self._episode_ended(results[2], results[3]):
            self._failed_steps_in_a_row = 0
        return results


class FiniteSingleAgentEnvRunner(_FiniteEnvRunnerMixin, SingleAgentEnvRunner):
    """RLlib's SingleAgentEnvRunner with :class:`FiniteValuesWrapper` around its (vector) env
    (see :class:`_FiniteEnvRunnerMixin`).

    Every env step counts (issue 39): after a failed env step RLlib 2.60 drops the unfinished
    episodes and restarts its step count for the ``sample()`` call at 0, so the steps taken
    before the failure (and the failing one) were never reported. Here the sampled-steps metrics
    get the steps the sub-envs really took (:class:`StepTally`), and the difference is logged as
    ``num_env_steps_dropped_lifetime`` (the families book it as wasted).
    """

    def _guard_env(self) -> None:
        if getattr(self, "_step_tally", None) is None:
            self._step_tally = StepTally()
        assert self.env is not None, "make_env() made no env"
        self.env = FiniteValuesWrapper(self.env, self._step_tally)

    @override(SingleAgentEnvRunner)
    def _increase_sampled_metrics(self, num_steps: int, num_episodes_completed: int) -> Any:
        taken, self._step_tally.taken = self._step_tally.taken, 0
        if taken > num_steps:
            self.metrics.log_value(NUM_ENV_STEPS_DROPPED_LIFETIME, taken - num_steps, reduce="lifetime_sum")
            self.metrics.log_value(NUM_ENV_STEPS_DROPPED, taken - num_steps, reduce="sum")
        # Unannotated in RLlib's SingleAgentEnvRunner.
        return super()._increase_sampled_metrics(max(taken, num_steps), num_episodes_completed)  # type: ignore[no-untyped-call]

    @staticmethod
    def _episode_ended(terminateds: Any, truncateds: Any) -> bool:
        return bool(np.any(terminateds) or np.any(truncateds))


class FiniteMultiAgentEnvRunner(_FiniteEnvRunnerMixin, MultiAgentEnvRunner):
    """RLlib's MultiAgentEnvRunner whose env reports a NaN/inf observation or reward (any agent,
    any sub-env) as a failed env step, as :class:`FiniteSingleAgentEnvRunner` does.

    RLlib 2.60 asserts that this runner's env *is* a ``VectorMultiAgentEnv``, so the env is not
    wrapped: its ``step`` and ``reset`` are replaced on the instance by checked ones.
    """

    def _guard_env(self) -> None:
        env = self.env
        assert env is not None, "make_env() made no env"
        step, reset = env.step, env.reset

        def checked_step(actions: Any) -> tuple[Any, Any, Any, Any, Any]:
            out = step(actions)
            raise_if_nonfinite("step()", out[0], out[1])
            return out

        def checked_reset(*, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, Any]:
            obs: Any
            infos: Any
            obs, infos = reset(seed=seed, options=options)
            raise_if_nonfinite("reset()", obs)
            return obs, infos

        # Replaced on the instance on purpose (see the class docstring), which mypy forbids for methods.
        env.step, env.reset = checked_step, checked_reset  # type: ignore[method-assign]

    @staticmethod
    def _episode_ended(terminateds: Any, truncateds: Any) -> bool:
        # One dict per sub-env; "__all__" ends that sub-env's episode.
        return any(d.get("__all__", False) for d in (*terminateds, *truncateds))
