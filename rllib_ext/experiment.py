"""The library under the ``rllib`` command: build a config, fit it to the cluster, run it through Tune, resume it.

Everything here checks user input the way the command does (algorithm name, env id, JSON, config
keys, the config's own ``validate()``, a YAML file's shape, a checkpoint path) and raises
:class:`ExperimentError` with one line that names the setting at fault; nothing here parses a
command line, prints, or exits. :mod:`rllib_ext.cli` turns these errors into its
``rllib: error: ...`` line and exit status 2; the race harness and the tests call the same
functions.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from rllib_ext import _compat

if TYPE_CHECKING:
    from ray.rllib.algorithms.algorithm import Algorithm
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
    from ray.tune import Tuner
    from ray.tune.execution.placement_groups import PlacementGroupFactory

logger = logging.getLogger(__name__)

# Metric names users know from older RLlib versions -> RLlib 2.60 result keys.
METRIC_ALIASES = {
    "episode_reward_mean": "env_runners/episode_return_mean",
    "episode_return_mean": "env_runners/episode_return_mean",
    "timesteps_total": "num_env_steps_sampled_lifetime",
}
RETURN_KEY = "env_runners/episode_return_mean"
STEPS_KEY = "num_env_steps_sampled_lifetime"


class ExperimentError(ValueError):
    """Bad input for an experiment (name, env, config, stop criteria, file, checkpoint, resources).

    Its message is one line that names the setting or file at fault.
    """


def first_line(e: BaseException) -> str:
    """The first line of an exception's message (its type's name if it has none)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


# ---------------------------------------------------------------------------------------------
# Config files and JSON (no Ray needed).
# ---------------------------------------------------------------------------------------------
def read_yaml(path: str, what: str) -> Any:
    """The parsed YAML file, or a one-line ExperimentError (``what`` names it in the message)."""
    import yaml

    if not os.path.isfile(path):
        raise ExperimentError(f"{what}: no such file: {path}")
    try:
        with open(path) as f:
            return yaml.safe_load(f)
    except yaml.YAMLError as e:
        raise ExperimentError(f"{what} {path} is not valid YAML: {first_line(e)}") from None


def load_config_file(path: str, option: str) -> dict[str, Any]:
    """``@FILE.yaml``: a ``configs/*.yaml`` file's ``config:`` block (or the whole mapping)."""
    doc = read_yaml(path, option)
    if isinstance(doc, dict) and isinstance(doc.get("config"), dict):
        doc = doc["config"]
    if not isinstance(doc, dict):
        raise ExperimentError(f"{option} @{path} must hold a mapping (or a 'config:' mapping)")
    return doc


def parse_json_dict(text: str | None, option: str) -> dict[str, Any]:
    """Parses JSON (or ``@FILE.yaml``) into a dict; ``option`` names the source in errors."""
    if text is None or text == "":
        return {}
    if text.startswith("@"):
        return load_config_file(text[1:], option)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ExperimentError(
            f"{option} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}): {text!r}"
        ) from None
    if not isinstance(value, dict):
        raise ExperimentError(f"{option} must be a JSON object like '{{\"key\": value}}', got {type(value).__name__}")
    return value


def translate_config(config: dict[str, Any], where: str, notice: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``config`` with old RLlib keys renamed (``notice`` gets a line for each), see :mod:`rllib_ext.legacy`.

    Raises:
        ExperimentError: For an old key without a one-to-one new name, or one given with its new name.
    """
    from rllib_ext.legacy import OldKeyError, translate_old_keys

    try:
        return translate_old_keys(config, where, notice=notice)
    except OldKeyError as e:
        raise ExperimentError(str(e)) from None


def load_experiments(path: str) -> list[tuple[str, dict[str, Any]]]:
    """Reads an old-format tuned example: ``{name: {run, env, stop, config}}``.

    ``env`` may also sit inside ``config``. Raises ExperimentError for a missing file, bad YAML, or
    an experiment without ``run`` or ``env``.
    """
    doc = read_yaml(path, "tuned example")
    if not isinstance(doc, dict) or not doc:
        raise ExperimentError(f"{path} must map an experiment name to {{run, env, stop, config}}")
    experiments = []
    for exp_name, exp in doc.items():
        if not isinstance(exp, dict):
            raise ExperimentError(f"{path}: experiment {exp_name!r} must be a mapping with run/env/stop/config")
        missing = [k for k in ("run",) if k not in exp]
        if "env" not in exp and "env" not in (exp.get("config") or {}):
            missing.append("env")
        if missing:
            raise ExperimentError(f"{path}: experiment {exp_name!r} has no {' or '.join(repr(m) for m in missing)}")
        experiments.append((str(exp_name), exp))
    return experiments


# ---------------------------------------------------------------------------------------------
# Algorithm, env, stop criteria, config.
# ---------------------------------------------------------------------------------------------
def resolve_algorithm(name: str) -> type[Algorithm]:
    """Returns the Algorithm class for ``name`` (rllib_ext or RLlib built-in) or raises ExperimentError."""
    from rllib_ext import registry

    cls = registry.resolve_algorithm_class(name)
    if cls is None:
        known = registry.all_names()
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean {close[0]}?" if close else ""
        raise ExperimentError(f"unknown algorithm {name!r}.{hint} Known: {', '.join(known)}")
    return cast("type[Algorithm]", cls)  # the registry's names are Algorithm classes


def check_env_id(env: str) -> None:
    """Raises ExperimentError unless ``env`` is a gymnasium id or a name registered with Tune."""
    import gymnasium as gym
    from ray.tune.registry import ENV_CREATOR

    if _compat.tune_registry_contains(ENV_CREATOR, env):
        return
    try:
        gym.spec(env)
        return
    except Exception as e:  # gymnasium raises several error types for unknown ids
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
    raise ExperimentError(f"unknown environment {env!r}: {reason}")


def normalize_stop(stop: dict[str, Any]) -> dict[str, Any]:
    """Maps old metric names (``episode_reward_mean``, ``timesteps_total``) to 2.60 keys."""
    return {METRIC_ALIASES.get(k, k): v for k, v in stop.items()}


def check_stop(stop: dict[str, Any], what: str) -> dict[str, Any]:
    """The normalized stop criteria, or an ExperimentError naming a value that is not a number."""
    stop = normalize_stop(stop)
    for key, value in stop.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ExperimentError(f"{what}: {key!r} must be a number (stop when the result reaches it), got {value!r}")
    return stop


class StopCriteria:
    """Tune's dict stop rule (stop once ``result[key] >= value`` for any key), quieter.

    Old metric names are mapped as by :func:`normalize_stop`.

    Tune's own rule logs the whole list of result keys when a criterion is missing from a
    result. That happens in the first iteration of most runs that stop on the return (no
    episode has finished yet; IMPACT_EXT's first iteration may hold no samples at all), so
    every such run started with a screenful of keys. Here a missing key is waited for. If it has
    never been seen and is still missing once episodes have finished (and at least
    ``warn_after`` iterations ran), or after ``10 * warn_after`` iterations in any case, ``warn``
    gets one line naming it with the closest result keys (a typo in the stop criteria then runs
    to its other criteria, as in Tune). Passed to Tune as a plain callable (Tune wraps it in a
    ``FunctionStopper``), so building one does not import Tune.

    Args:
        criteria: ``{result key: threshold}``, '/'-separated keys for nested results.
        warn_after: Iterations (with finished episodes) before a missing key is reported.
        warn: Called with the line about a missing key; None: a warning of this module's logger.
    """

    def __init__(self, criteria: dict[str, float], warn_after: int = 3, warn: Callable[[str], None] | None = None):
        self.criteria = normalize_stop(criteria)
        self.warn_after = warn_after
        self.warn = warn
        self._seen: set[str] = set()
        self._warned: set[str] = set()

    def __call__(self, trial_id: str, result: Mapping[str, Any]) -> bool:
        from ray.tune.utils import flatten_dict

        flat = flatten_dict(dict(result), delimiter="/")
        stop = False
        for key, value in self.criteria.items():
            if isinstance(flat.get(key), (int, float)):
                self._seen.add(key)
                stop = stop or flat[key] >= value
            elif key not in self._seen and key not in self._warned and self._should_have_appeared(flat):
                self._warned.add(key)
                close = difflib.get_close_matches(
                    key, [k for k in flat if not k.startswith("config/")], n=3, cutoff=0.5
                )
                hint = f"; closest result keys: {', '.join(close)}" if close else ""
                line = (
                    f"stop criterion {key!r} is not in the results after "
                    f"{flat.get('training_iteration')} iterations{hint}"
                )
                (self.warn or logger.warning)(line)
        return stop

    def _should_have_appeared(self, flat: dict[str, Any]) -> bool:
        iteration = flat.get("training_iteration", 0) or 0
        episodes = flat.get("env_runners/num_episodes_lifetime", 0) or 0
        return (iteration >= self.warn_after and episodes > 0) or iteration >= 10 * self.warn_after


def build_config(
    algo_cls: type[Algorithm],
    env: str | None,
    overrides: dict[str, Any],
    *,
    num_env_runners: int | None = None,
    seed: int | None = None,
) -> AlgorithmConfig:
    """Default config of ``algo_cls`` with the env and overrides applied and validated.

    Raises:
        ExperimentError: For no or an unknown env, a config key the algorithm does not have, or a
            value its ``validate()`` rejects.
    """
    config = algo_cls.get_default_config()
    overrides = dict(overrides)
    env = env or overrides.pop("env", None)
    if env is None:
        raise ExperimentError("no environment given: pass --env ENV (or 'env' in the config)")
    overrides.pop("env", None)
    check_env_id(env)
    unknown = []
    for key in overrides:
        translated = _compat.translate_config_key(config, key)
        try:
            known = hasattr(config, translated)
        except Exception as e:  # RLlib's deprecated properties raise ValueError from the getter
            raise ExperimentError(f"config key {key!r} is no longer an RLlib 2.60 setting: {first_line(e)}") from None
        if not known:
            unknown.append(key)
    if unknown:
        valid = sorted(k for k in vars(config) if not k.startswith("_"))
        msgs = []
        for key in unknown:
            close = difflib.get_close_matches(key, valid, n=1)
            msgs.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ExperimentError(f"{algo_cls.__name__} has no config key {', '.join(msgs)}")
    try:
        # `model_config` is a read-only property of AlgorithmConfig in 2.60: route it through
        # rl_module() so that `--config '{"model_config": {...}}'` works for every algorithm.
        model_config = overrides.pop("model_config", None)
        config.update_from_dict(overrides)
        if model_config is not None:
            config.rl_module(model_config=model_config)
        config.environment(env)
        if num_env_runners is not None:
            config.env_runners(num_env_runners=num_env_runners)
        if seed is not None:
            config.debugging(seed=seed)
        config.copy(copy_frozen=False).validate()
    except Exception as e:  # validate() raises ValueError; setters may raise TypeError
        raise ExperimentError(f"invalid config for {algo_cls.__name__}: {first_line(e)}") from None
    return config


# ---------------------------------------------------------------------------------------------
# Ray and the cluster's resources.
# ---------------------------------------------------------------------------------------------
def init_ray(address: str | None, num_cpus: int | None) -> bool:
    """Connects to ``address`` (a cluster, or 'auto') or starts a local Ray; reuses a running one.

    Returns:
        Whether this call started (or connected) Ray; False when one was running already.
    """
    import ray

    import rllib_ext  # noqa: F401 - registers names (again, after init, via the post-init hook)

    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, logging_level=logging.WARNING)
    else:
        # address="local": a new local instance even when RAY_ADDRESS points elsewhere.
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, logging_level=logging.WARNING)
    return True


def trial_resources(algo_cls: type[Algorithm], config: AlgorithmConfig) -> dict[str, float]:
    """The resources one trial of ``algo_cls`` with ``config`` asks Tune for (driver, learners,
    runners; the ERL critic's GPU), e.g. ``{"CPU": 3, "GPU": 1}``; it validates the config."""
    request = algo_cls.default_resource_request(config)
    # RLlib's Algorithm classes return a PlacementGroupFactory (the annotation also allows Tune's old Resources).
    return dict(cast("PlacementGroupFactory", request).required_resources) if request is not None else {}


def cpus_needed(algo_cls: type[Algorithm], config: AlgorithmConfig) -> float:
    """CPUs one trial of ``algo_cls`` with ``config`` asks Tune for (driver, learners, runners)."""
    return trial_resources(algo_cls, config).get("CPU", 0)


@dataclasses.dataclass(frozen=True)
class RunnerFit:
    """What :func:`fit_env_runners` chose instead of the configured number of env runners.

    Attributes:
        wanted: The configured number of env runners.
        fitted: The number now set in the config.
        cpus_wanted: CPUs one trial would need with ``wanted`` env runners.
        free: Free CPUs in the cluster.
        total: The cluster's CPUs when the fit used them (too few free), else None.
    """

    wanted: int
    fitted: int
    cpus_wanted: float
    free: float
    total: float | None = None

    @property
    def room(self) -> str:
        """The CPUs the fit was made for, in words: ``"2 free"`` or ``"2 in all, 1 free now"``."""
        if self.total is None:
            return f"{self.free:g} free"
        return f"{self.total:g} in all, {self.free:g} free now"


def fit_env_runners(
    algo: str, algo_cls: type[Algorithm], config: AlgorithmConfig, *, explicit: bool
) -> RunnerFit | None:
    """Lowers ``config.num_env_runners`` until one trial fits the cluster's free CPUs.

    The default number of env runners of an algorithm (or a tuned example's) may need more CPUs
    than a laptop has; Tune would then wait forever. When the user did not ask for a number
    (``explicit`` false), the largest number from the configured one down to 1 that fits the
    free CPUs is used. If none fits the free CPUs (some are still held, e.g. by actors of a run
    that is shutting down) the cluster's total is used instead, and Tune waits for them. An
    explicit request is left alone: :func:`check_resources` then fails with a clear error if it
    does not fit.

    Returns:
        What was chosen, or None when the config was left as it is (it fits, it was explicit, or
        not even one env runner fits: :func:`check_resources` says so).

    Raises:
        ExperimentError: When the config with the fitted number fails its ``validate()``
            (``algo`` names it).
    """
    import ray

    wanted = config.num_env_runners
    if explicit or wanted <= 1:
        return None
    needed_wanted = cpus_needed(algo_cls, config)
    free = ray.available_resources().get("CPU", 0)
    if needed_wanted <= free:
        return None

    def largest_fit(cpus: float) -> int | None:
        for n in range(wanted - 1, 0, -1):
            config.env_runners(num_env_runners=n)
            if cpus_needed(algo_cls, config) <= cpus:
                return n
        return None

    fitted, total = largest_fit(free), None
    if fitted is None:
        total = ray.cluster_resources().get("CPU", 0)
        fitted = largest_fit(total)
    if fitted is None:  # not even one env runner fits: check_resources says so
        config.env_runners(num_env_runners=wanted)
        return None
    fit = RunnerFit(wanted=wanted, fitted=fitted, cpus_wanted=needed_wanted, free=free, total=total)
    try:
        config.copy(copy_frozen=False).validate()
    except Exception as e:
        raise ExperimentError(
            f"{algo} with {fitted} env runner(s), the most that fit the cluster ({fit.room} CPUs), "
            f"is not a valid config: {first_line(e)}"
        ) from None
    return fit


def check_resources(algo_cls: type[Algorithm], config: AlgorithmConfig) -> None:
    """Fails fast when a trial asks for more CPUs or GPUs than the cluster has (Tune would wait forever).

    Raises:
        ExperimentError: Naming what the trial asks for and what the cluster has.
    """
    import ray

    wanted = trial_resources(algo_cls, config)  # validates the config: asked for once
    cluster = ray.cluster_resources()
    gpus, have_gpus = wanted.get("GPU", 0), cluster.get("GPU", 0)
    if gpus > have_gpus:
        raise ExperimentError(
            f"{algo_cls.__name__} asks for {gpus:g} GPUs (num_gpus_per_learner, critic_num_gpus) but the Ray "
            f"cluster has {have_gpus:g}"
        )
    needed, have = wanted.get("CPU", 0), cluster.get("CPU", 0)
    one = config.copy(copy_frozen=False).env_runners(num_env_runners=min(1, config.num_env_runners))
    needed_one = cpus_needed(algo_cls, one)
    if needed_one > have:
        raise ExperimentError(
            f"{algo_cls.__name__} needs at least {needed_one:g} CPUs (with "
            f"{one.num_env_runners} env runner) but the Ray cluster has {have:g}: raise --num-cpus or "
            f"use a larger cluster (--ray-address)"
        )
    if needed > have:
        raise ExperimentError(
            f"{algo_cls.__name__} with {config.num_env_runners} env runner(s) needs {needed:g} CPUs "
            f"but the Ray cluster has {have:g}: lower --num-env-runners or raise --num-cpus"
        )


# ---------------------------------------------------------------------------------------------
# Running through Tune.
# ---------------------------------------------------------------------------------------------
def make_tuner(
    algo: str,
    config: AlgorithmConfig,
    stop: dict[str, Any],
    *,
    name: str | None = None,
    storage_path: str | None = None,
    num_samples: int = 1,
    checkpoint_freq: int = 0,
    checkpoint_at_end: bool = False,
    keep_checkpoints: int | None = None,
    callbacks: Iterable[Any] = (),
    warn: Callable[[str], None] | None = None,
) -> tuple[Tuner, str]:
    """A Tune experiment of ``algo`` with ``config``, and the folder its results go to.

    Args:
        algo: The registered algorithm name.
        config: The algorithm's config (:func:`build_config`).
        stop: Stop criteria for :class:`StopCriteria` (none: run until stopped).
        name: The experiment's name (default ``ALGO_ENV_DATE``).
        storage_path: Where results go (default ``~/ray_results``).
        num_samples: Tune samples.
        checkpoint_freq: Checkpoint every N iterations (0: never).
        checkpoint_at_end: Checkpoint when the run stops.
        keep_checkpoints: Checkpoints kept per trial, the newest (None: all).
        callbacks: Tune callbacks (e.g. a progress printer).
        warn: Passed to :class:`StopCriteria`.

    Returns:
        ``(tuner, logdir)``: call ``tuner.fit()``; TensorBoard reads ``logdir``.
    """
    from ray import tune

    storage_path = os.path.abspath(os.path.expanduser(storage_path or "~/ray_results"))
    env_name = str(config.env).replace("/", "-")
    name = name or f"{algo}_{env_name}_{time.strftime('%Y-%m-%d_%H-%M-%S')}"
    tuner = tune.Tuner(
        algo,
        param_space=config,  # type: ignore[arg-type]  # Tune takes an AlgorithmConfig (its to_dict()); typed dict only
        tune_config=tune.TuneConfig(num_samples=num_samples),
        run_config=tune.RunConfig(
            name=name,
            storage_path=storage_path,
            stop=StopCriteria(stop, warn=warn) if stop else None,
            verbose=0,
            callbacks=list(callbacks),
            checkpoint_config=tune.CheckpointConfig(
                checkpoint_frequency=checkpoint_freq,
                checkpoint_at_end=checkpoint_at_end,
                num_to_keep=keep_checkpoints,
            ),
        ),
    )
    return tuner, os.path.join(storage_path, name)


#: The file Tune keeps in an experiment folder; :func:`resume` needs it.
TUNER_STATE = "tuner.pkl"


def find_experiment(path: str, storage_path: str | None = None) -> str:
    """The experiment folder ``rllib train --resume PATH`` means.

    Args:
        path: The experiment folder ``rllib train`` printed ("results in ..."), or its name under
            ``storage_path``.
        storage_path: Where a bare name is looked up (default ``~/ray_results``).

    Returns:
        The absolute path of a folder holding Tune's experiment state.

    Raises:
        ExperimentError: One line naming where it looked.
    """
    storage_path = os.path.abspath(os.path.expanduser(storage_path or "~/ray_results"))
    given = os.path.abspath(os.path.expanduser(path))
    candidates = [given] if os.path.isdir(given) or os.sep in path else [given, os.path.join(storage_path, path)]
    for folder in candidates:
        if os.path.isfile(os.path.join(folder, TUNER_STATE)):
            return folder
    for folder in candidates:
        if os.path.isfile(os.path.join(os.path.dirname(folder), TUNER_STATE)):
            raise ExperimentError(
                f"--resume {path}: that is a trial folder; give its experiment folder {os.path.dirname(folder)}"
            )
    looked = " or ".join(candidates)
    raise ExperimentError(
        f"--resume {path}: no experiment to resume in {looked} (give the folder rllib train printed as "
        f"'results in ...', or its name under --storage-path {storage_path})"
    )


def trainable_name(experiment_dir: str) -> str:
    """The registered algorithm an experiment folder's Tune state was started with.

    Raises:
        ExperimentError: When the state cannot be read, or names no trainable.
    """
    import ray.cloudpickle as pickle

    import rllib_ext  # noqa: F401 - the names the state refers to

    where = os.path.join(experiment_dir, TUNER_STATE)
    try:
        with open(where, "rb") as f:
            state = pickle.load(f)
        name = state.get("__trainable_name")
    except Exception as e:  # a truncated or foreign file: say which
        raise ExperimentError(f"--resume: cannot read Tune's experiment state {where}: {first_line(e)}") from None
    if not isinstance(name, str):
        raise ExperimentError(f"--resume: {where} names no algorithm (not an experiment rllib train started)")
    return name


def resume(path: str, *, storage_path: str | None = None) -> tuple[Tuner, str, str]:
    """Continues an interrupted experiment (Ctrl-C, or its driver killed) from its trials' last checkpoints.

    Through Tune's restore (:meth:`ray.tune.Tuner.restore`): unfinished trials, and trials that
    failed, go on from their latest checkpoint (``resume_errored=True``, not restarted from
    scratch), with the iteration and env-step counts the checkpoint holds; finished trials stay
    finished. The experiment keeps its config, stop criteria (checked against the continued
    counts), checkpoint settings and callbacks: Tune saved them with it. Tune records the trials'
    checkpoints in the experiment state every ~10 s, so a killed driver goes on from the last
    checkpoint recorded by then. Ray must be running.

    Args:
        path: The experiment folder (:func:`find_experiment`), or its name under ``storage_path``.
        storage_path: Where a bare name is looked up (default ``~/ray_results``).

    Returns:
        ``(tuner, logdir, algo)``: call ``tuner.fit()``; ``logdir`` is the experiment folder (results
        are appended there), ``algo`` the registered name it trains.

    Raises:
        ExperimentError: No experiment at ``path``, or one whose algorithm is not registered.
    """
    from ray import tune

    logdir = find_experiment(path, storage_path)
    algo = trainable_name(logdir)
    resolve_algorithm(algo)
    tuner = tune.Tuner.restore(
        logdir, trainable=algo, resume_unfinished=True, resume_errored=True, restart_errored=False
    )
    return tuner, logdir, algo


def unfinished_trials(logdir: str) -> int:
    """How many trials of the experiment in ``logdir`` neither finished nor failed, as Tune saved its
    state: after a Ctrl-C (Tune stops the run and saves it) these are what :func:`resume` goes on with."""
    from ray import tune

    try:
        trials = tune.ExperimentAnalysis(logdir).trials or []
    except Exception:  # no state saved (nothing ran): nothing to resume
        return 0
    return sum(t.status not in ("TERMINATED", "ERROR") for t in trials)


# ---------------------------------------------------------------------------------------------
# Checkpoints.
# ---------------------------------------------------------------------------------------------
def find_checkpoint(path: str) -> str:
    """An algorithm checkpoint dir: ``path`` itself, or the newest ``checkpoint_*`` below it."""
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(path):
        raise ExperimentError(f"checkpoint path does not exist: {path}")
    if os.path.isfile(os.path.join(path, "rllib_checkpoint.json")):
        return path
    found = []
    for root, dirs, files in os.walk(path):
        if "rllib_checkpoint.json" in files and os.path.basename(root).startswith("checkpoint_"):
            found.append(root)
            dirs[:] = []
    if not found:
        raise ExperimentError(f"no RLlib checkpoint in {path} (expected rllib_checkpoint.json or checkpoint_*/)")
    return max(found, key=os.path.getmtime)


def load_checkpoint_config(checkpoint: str) -> tuple[type[Algorithm], AlgorithmConfig]:
    """(Algorithm class, a fresh unfrozen config) as saved in an RLlib checkpoint dir."""
    import pickle

    try:
        with open(os.path.join(checkpoint, "class_and_ctor_args.pkl"), "rb") as f:
            saved = pickle.load(f)
        algo_cls = saved["class"]
        config_dict = saved["ctor_args_and_kwargs"][0][0]
    except Exception as e:
        raise ExperimentError(f"cannot read the algorithm config in {checkpoint}: {first_line(e)}") from None
    config = algo_cls.get_default_config()
    config = (
        config.update_from_dict(config_dict) if isinstance(config_dict, dict) else config_dict.copy(copy_frozen=False)
    )
    return algo_cls, config
