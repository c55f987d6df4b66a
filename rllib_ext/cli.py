"""The ``rllib`` command: train, train file, evaluate, list, plot.

Ray 2.60 ships no ``rllib`` console script; this one keeps the spellings old-RLlib users know
(``rllib train --algo PPO --env CartPole-v1 --stop '{...}' --config '{...}'`` and
``rllib train file X.yaml``). It is written with :mod:`argparse`: the standard library covers
every option here, so the package gains no dependency and ``--help`` is free.

Every check of user input (algorithm name, env id, JSON, config keys, the config's own
``validate()``, a YAML file's shape, a checkpoint path) runs before Ray starts; a failure prints
one ``rllib: error: ...`` line and exits with status 2. Training runs through Tune, so
TensorBoard event files, ``progress.csv`` and checkpoints come from Tune.
"""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

USAGE_ERROR = 2
RUN_FAILED = 1

# Metric names users know from older RLlib versions -> RLlib 2.60 result keys.
METRIC_ALIASES = {
    "episode_reward_mean": "env_runners/episode_return_mean",
    "episode_return_mean": "env_runners/episode_return_mean",
    "timesteps_total": "num_env_steps_sampled_lifetime",
}
RETURN_KEY = "env_runners/episode_return_mean"
STEPS_KEY = "num_env_steps_sampled_lifetime"


class CLIError(Exception):
    """Bad user input: printed as one line, exit status 2."""


# ---------------------------------------------------------------------------------------------
# Input checks (no Ray needed).
# ---------------------------------------------------------------------------------------------
def read_yaml(path: str, what: str) -> Any:
    """The parsed YAML file, or a one-line CLIError (``what`` names it in the message)."""
    import yaml

    if not os.path.isfile(path):
        raise CLIError(f"{what}: no such file: {path}")
    try:
        with open(path) as f:
            return yaml.safe_load(f)
    except yaml.YAMLError as e:
        raise CLIError(f"{what} {path} is not valid YAML: {_first_line(e)}") from None


def load_config_file(path: str, option: str) -> dict[str, Any]:
    """``@FILE.yaml``: a ``configs/*.yaml`` file's ``config:`` block (or the whole mapping)."""
    doc = read_yaml(path, option)
    if isinstance(doc, dict) and isinstance(doc.get("config"), dict):
        doc = doc["config"]
    if not isinstance(doc, dict):
        raise CLIError(f"{option} @{path} must hold a mapping (or a 'config:' mapping)")
    return doc


def parse_json_dict(text: str | None, option: str) -> dict[str, Any]:
    """Parses ``--config``/``--stop`` JSON (or ``@FILE.yaml``) into a dict, or raises CLIError."""
    if text is None or text == "":
        return {}
    if text.startswith("@"):
        return load_config_file(text[1:], option)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise CLIError(f"{option} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}): {text!r}") from None
    if not isinstance(value, dict):
        raise CLIError(f"{option} must be a JSON object like '{{\"key\": value}}', got {type(value).__name__}")
    return value


def parse_config_options(values: list[str] | None) -> dict[str, Any]:
    """Merges repeated ``--config`` options (JSON or @FILE.yaml) in order; later keys win.

    Old RLlib keys are renamed (one notice line each) or rejected, see :mod:`rllib_ext.legacy`.
    """
    merged: dict[str, Any] = {}
    for text in values or []:
        where = f"--config {text}" if text.startswith("@") else "--config"
        merged.update(translate_config(parse_json_dict(text, "--config"), where))
    return merged


def translate_config(config: dict[str, Any], where: str) -> dict[str, Any]:
    """``config`` with old RLlib keys renamed (a ``rllib: note:`` line each), or a CLIError."""
    from rllib_ext.legacy import OldKeyError, translate_old_keys

    try:
        return translate_old_keys(config, where, notice=lambda line: print(f"rllib: note: {line}", file=sys.stderr))
    except OldKeyError as e:
        raise CLIError(str(e)) from None


def explicit_env_runners(values: list[str] | None) -> bool:
    """Whether a ``--config`` JSON (not an @FILE) sets the number of env runners itself."""
    from rllib_ext.legacy import RENAMED

    keys = {"num_env_runners"} | {old for old, new in RENAMED.items() if new == "num_env_runners"}
    return any(not text.startswith("@") and keys & set(parse_json_dict(text, "--config")) for text in values or [])


def resolve_algorithm(name: str):
    """Returns the Algorithm class for ``name`` (rllib_ext or RLlib built-in) or raises CLIError."""
    from rllib_ext import registry

    cls = registry.resolve_algorithm_class(name)
    if cls is None:
        known = registry.all_names()
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean {close[0]}?" if close else ""
        raise CLIError(f"unknown algorithm {name!r}.{hint} Known: {', '.join(known)}")
    return cls


def check_env_id(env: str) -> None:
    """Raises CLIError unless ``env`` is a gymnasium id or a name registered with Tune."""
    import gymnasium as gym
    from ray.tune.registry import ENV_CREATOR, _global_registry

    if _global_registry.contains(ENV_CREATOR, env):
        return
    try:
        gym.spec(env)
        return
    except Exception as e:  # gymnasium raises several error types for unknown ids
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
    raise CLIError(f"unknown environment {env!r}: {reason}")


def normalize_stop(stop: dict[str, Any]) -> dict[str, Any]:
    """Maps old metric names (``episode_reward_mean``, ``timesteps_total``) to 2.60 keys."""
    return {METRIC_ALIASES.get(k, k): v for k, v in stop.items()}


def check_stop(stop: dict[str, Any], what: str) -> dict[str, Any]:
    """The normalized stop criteria, or a CLIError naming a value that is not a number."""
    stop = normalize_stop(stop)
    for key, value in stop.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CLIError(f"{what}: {key!r} must be a number (stop when the result reaches it), got {value!r}")
    return stop


class StopCriteria:
    """Tune's dict stop rule (stop once ``result[key] >= value`` for any key), quieter.

    Old metric names are mapped as by :func:`normalize_stop`.

    Tune's own rule logs the whole list of result keys when a criterion is missing from a
    result. That happens in the first iteration of most runs that stop on the return (no
    episode has finished yet; IMPACT_EXT's first iteration may hold no samples at all), so
    every such run started with a screenful of keys. Here a missing key is waited for. If it has
    never been seen and is still missing once episodes have finished (and at least
    ``warn_after`` iterations ran), or after ``10 * warn_after`` iterations in any case, one line
    on stderr names it with the closest result keys (a typo in ``--stop`` then runs to its
    other criteria, as in Tune). Passed to Tune as a plain callable (Tune wraps it in a
    ``FunctionStopper``), so the CLI does not import Tune before it needs to.
    """

    def __init__(self, criteria: dict[str, float], warn_after: int = 3, stream=None):
        self.criteria = normalize_stop(criteria)
        self.warn_after = warn_after
        self.stream = stream
        self._seen: set = set()
        self._warned: set = set()

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        from ray.tune.utils import flatten_dict

        flat = flatten_dict(result, delimiter="/")
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
                print(
                    f"rllib: warning: stop criterion {key!r} is not in the results after "
                    f"{flat.get('training_iteration')} iterations{hint}",
                    file=self.stream or sys.stderr,
                    flush=True,
                )
        return stop

    def _should_have_appeared(self, flat: dict[str, Any]) -> bool:
        iteration = flat.get("training_iteration", 0) or 0
        episodes = flat.get("env_runners/num_episodes_lifetime", 0) or 0
        return (iteration >= self.warn_after and episodes > 0) or iteration >= 10 * self.warn_after


def build_config(
    algo_cls,
    env: str | None,
    overrides: dict[str, Any],
    *,
    num_env_runners: int | None = None,
    seed: int | None = None,
):
    """Default config of ``algo_cls`` with the env and overrides applied and validated.

    Raises:
        CLIError: For a config key the algorithm does not have, or a value its ``validate()``
            rejects.
    """
    config = algo_cls.get_default_config()
    overrides = dict(overrides)
    env = env or overrides.pop("env", None)
    if env is None:
        raise CLIError("no environment given: pass --env ENV (or 'env' in the config)")
    overrides.pop("env", None)
    check_env_id(env)
    unknown = []
    for key in overrides:
        translated = config._translate_special_keys(key, warn_deprecated=False)
        try:
            known = hasattr(config, translated)
        except Exception as e:  # RLlib's deprecated properties raise ValueError from the getter
            raise CLIError(f"config key {key!r} is no longer an RLlib 2.60 setting: {_first_line(e)}") from None
        if not known:
            unknown.append(key)
    if unknown:
        valid = sorted(k for k in vars(config) if not k.startswith("_"))
        msgs = []
        for key in unknown:
            close = difflib.get_close_matches(key, valid, n=1)
            msgs.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise CLIError(f"{algo_cls.__name__} has no config key {', '.join(msgs)}")
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
    except CLIError:
        raise
    except Exception as e:  # validate() raises ValueError; setters may raise TypeError
        raise CLIError(f"invalid config for {algo_cls.__name__}: {_first_line(e)}") from None
    return config


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


# ---------------------------------------------------------------------------------------------
# Ray / Tune.
# ---------------------------------------------------------------------------------------------
def init_ray(address: str | None, num_cpus: int | None) -> None:
    """Connects to ``address`` (a cluster, or 'auto') or starts a local Ray; reuses a running one."""
    import ray

    import rllib_ext  # noqa: F401 - registers names (again, after init, via the post-init hook)

    global _STARTED_RAY
    if ray.is_initialized():
        return
    if address:
        ray.init(address=address, logging_level=logging.WARNING)
    else:
        # address="local": a new local instance even when RAY_ADDRESS points elsewhere.
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, logging_level=logging.WARNING)
    _STARTED_RAY = True
    if _QUIET is not None:
        _QUIET.filter_log_handlers()


def shutdown_ray() -> None:
    """Disconnects the Ray that :func:`init_ray` started (never one it found running).

    Called while the noise filters are still installed: Ray's driver prints the workers' last
    deduplicated lines when it shuts down, which at interpreter exit would pass unfiltered.
    """
    global _STARTED_RAY
    if _STARTED_RAY:
        import ray

        _STARTED_RAY = False
        if ray.is_initialized():
            ray.shutdown()


def trial_resources(algo_cls, config) -> dict[str, float]:
    """The resources one trial of ``algo_cls`` with ``config`` asks Tune for (driver, learners,
    runners; the ERL critic's GPU), e.g. ``{"CPU": 3, "GPU": 1}``; it validates the config."""
    request = algo_cls.default_resource_request(config)
    return dict(request.required_resources) if request is not None else {}


def cpus_needed(algo_cls, config) -> float:
    """CPUs one trial of ``algo_cls`` with ``config`` asks Tune for (driver, learners, runners)."""
    return trial_resources(algo_cls, config).get("CPU", 0)


def fit_env_runners(algo: str, algo_cls, config, *, explicit: bool, stream=None) -> None:
    """Lowers ``config.num_env_runners`` until one trial fits the cluster's free CPUs.

    The default number of env runners of an algorithm (or a tuned example's) may need more CPUs
    than a laptop has; Tune would then wait forever. When the user did not ask for a number
    (``explicit`` false), the largest number from the configured one down to 1 that fits the
    free CPUs is used, and one line says so. If none fits the free CPUs (some are still held,
    e.g. by actors of a run that is shutting down) the cluster's total is used instead, and
    Tune waits for them. An explicit request is left alone: :func:`check_resources` then fails
    with a clear error if it does not fit.
    """
    import ray

    wanted = config.num_env_runners
    if explicit or wanted <= 1:
        return
    needed_wanted = cpus_needed(algo_cls, config)
    free = ray.available_resources().get("CPU", 0)
    if needed_wanted <= free:
        return

    def largest_fit(cpus: float) -> int | None:
        for n in range(wanted - 1, 0, -1):
            config.env_runners(num_env_runners=n)
            if cpus_needed(algo_cls, config) <= cpus:
                return n
        return None

    fitted, room = largest_fit(free), f"{free:g} free"
    if fitted is None:
        total = ray.cluster_resources().get("CPU", 0)
        fitted, room = largest_fit(total), f"{total:g} in all, {free:g} free now"
    if fitted is None:  # not even one env runner fits: check_resources says so
        config.env_runners(num_env_runners=wanted)
        return
    try:
        config.copy(copy_frozen=False).validate()
    except Exception as e:
        raise CLIError(
            f"{algo} with {fitted} env runner(s), the most that fit the cluster ({room} CPUs), "
            f"is not a valid config: {_first_line(e)}"
        ) from None
    print(
        f"rllib: {algo}: {fitted} env runner(s) instead of {wanted} ({wanted} would need "
        f"{needed_wanted:g} CPUs, the cluster has {room}; --num-env-runners N chooses)",
        file=stream or sys.stderr,
        flush=True,
    )


def check_resources(algo_cls, config) -> None:
    """Fails fast when a trial asks for more CPUs or GPUs than the cluster has (Tune would wait forever)."""
    import ray

    wanted = trial_resources(algo_cls, config)  # validates the config: asked for once
    cluster = ray.cluster_resources()
    gpus, have_gpus = wanted.get("GPU", 0), cluster.get("GPU", 0)
    if gpus > have_gpus:
        raise CLIError(
            f"{algo_cls.__name__} asks for {gpus:g} GPUs (num_gpus_per_learner, critic_num_gpus) but the Ray "
            f"cluster has {have_gpus:g}"
        )
    needed, have = wanted.get("CPU", 0), cluster.get("CPU", 0)
    one = config.copy(copy_frozen=False).env_runners(num_env_runners=min(1, config.num_env_runners))
    needed_one = cpus_needed(algo_cls, one)
    if needed_one > have:
        raise CLIError(
            f"{algo_cls.__name__} needs at least {needed_one:g} CPUs (with "
            f"{one.num_env_runners} env runner) but the Ray cluster has {have:g}: raise --num-cpus or "
            f"use a larger cluster (--ray-address)"
        )
    if needed > have:
        raise CLIError(
            f"{algo_cls.__name__} with {config.num_env_runners} env runner(s) needs {needed:g} CPUs "
            f"but the Ray cluster has {have:g}: lower --num-env-runners or raise --num-cpus"
        )


def _progress_callback():
    from ray import tune

    class ProgressPrinter(tune.Callback):
        """One readable line per training iteration."""

        def on_trial_result(self, iteration, trials, trial, result, **info):
            env_runners = result.get("env_runners", {}) or {}
            ret = env_runners.get("episode_return_mean")
            ret_s = f"{ret:9.2f}" if isinstance(ret, (int, float)) else "      n/a"
            steps = result.get(STEPS_KEY, env_runners.get(STEPS_KEY, 0)) or 0
            prefix = f"[{trial.trial_id}] " if len(trials) > 1 else ""
            print(
                f"{prefix}iter {result.get('training_iteration', 0):4d} | env steps {int(steps):>10,d} | "
                f"return {ret_s} | iter {result.get('time_this_iter_s', 0.0):6.1f} s | "
                f"total {result.get('time_total_s', 0.0):7.1f} s",
                flush=True,
            )

        def on_trial_error(self, iteration, trials, trial, **info):
            print(f"trial {trial.trial_id} failed: see {trial.path}/error.txt", file=sys.stderr, flush=True)

    return ProgressPrinter()


def run_experiment(
    algo: str,
    config,
    stop: dict[str, Any],
    *,
    name: str | None,
    storage_path: str | None,
    num_samples: int = 1,
    checkpoint_freq: int = 0,
    checkpoint_at_end: bool = False,
) -> int:
    """Runs one Tune experiment with a progress line per iteration; returns the exit status."""
    from ray import tune

    storage_path = os.path.abspath(os.path.expanduser(storage_path or "~/ray_results"))
    env_name = str(config.env).replace("/", "-")
    name = name or f"{algo}_{env_name}_{time.strftime('%Y-%m-%d_%H-%M-%S')}"
    logdir = os.path.join(storage_path, name)
    print(f"rllib: training {algo} on {config.env}; TensorBoard: tensorboard --logdir {logdir}", flush=True)
    tuner = tune.Tuner(
        algo,
        param_space=config,
        tune_config=tune.TuneConfig(num_samples=num_samples),
        run_config=tune.RunConfig(
            name=name,
            storage_path=storage_path,
            stop=StopCriteria(stop) if stop else None,
            verbose=0,
            callbacks=[_progress_callback()],
            checkpoint_config=tune.CheckpointConfig(
                checkpoint_frequency=checkpoint_freq,
                checkpoint_at_end=checkpoint_at_end,
            ),
        ),
    )
    results = tuner.fit()
    status = 0
    for result in results:
        trial_dir = result.path
        if result.error is not None:
            status = RUN_FAILED
            print(f"rllib: trial in {trial_dir} failed: {_first_line(result.error)}", file=sys.stderr)
            continue
        metrics = result.metrics or {}
        ret = (metrics.get("env_runners") or {}).get("episode_return_mean")
        ckpt = f"; checkpoint: {result.checkpoint.path}" if result.checkpoint else ""
        ret_s = f"{ret:.2f}" if isinstance(ret, (int, float)) else "n/a"
        print(
            f"rllib: done {metrics.get('training_iteration', 0)} iterations, "
            f"{int(metrics.get(STEPS_KEY, 0) or 0):,d} env steps, return {ret_s}{ckpt}"
        )
    print(f"rllib: results in {logdir}\nrllib: TensorBoard: tensorboard --logdir {logdir}", flush=True)
    return status


# ---------------------------------------------------------------------------------------------
# Commands.
# ---------------------------------------------------------------------------------------------
def cmd_train(args) -> int:
    algo_cls = resolve_algorithm(args.algo)
    overrides = parse_config_options(args.config)
    stop = check_stop(parse_json_dict(args.stop, "--stop"), "--stop")
    config = build_config(algo_cls, args.env, overrides, num_env_runners=args.num_env_runners, seed=args.seed)
    init_ray(args.ray_address, args.num_cpus)
    explicit = args.num_env_runners is not None or explicit_env_runners(args.config)
    fit_env_runners(args.algo, algo_cls, config, explicit=explicit)
    check_resources(algo_cls, config)
    return run_experiment(
        args.algo,
        config,
        stop,
        name=args.name,
        storage_path=args.storage_path,
        num_samples=args.num_samples,
        checkpoint_freq=args.checkpoint_freq,
        checkpoint_at_end=args.checkpoint_at_end,
    )


def load_experiments(path: str) -> list[tuple[str, dict[str, Any]]]:
    """Reads an old-format tuned example: ``{name: {run, env, stop, config}}``.

    ``env`` may also sit inside ``config``. Raises CLIError for a missing file, bad YAML, or an
    experiment without ``run`` or ``env``.
    """
    doc = read_yaml(path, "tuned example")
    if not isinstance(doc, dict) or not doc:
        raise CLIError(f"{path} must map an experiment name to {{run, env, stop, config}}")
    experiments = []
    for exp_name, exp in doc.items():
        if not isinstance(exp, dict):
            raise CLIError(f"{path}: experiment {exp_name!r} must be a mapping with run/env/stop/config")
        missing = [k for k in ("run",) if k not in exp]
        if "env" not in exp and "env" not in (exp.get("config") or {}):
            missing.append("env")
        if missing:
            raise CLIError(f"{path}: experiment {exp_name!r} has no {' or '.join(repr(m) for m in missing)}")
        experiments.append((str(exp_name), exp))
    return experiments


def cmd_train_file(args) -> int:
    experiments = load_experiments(args.file)
    stop_override = parse_json_dict(args.stop, "--stop")
    config_override = parse_config_options(args.config)
    prepared = []
    for exp_name, exp in experiments:
        algo_cls = resolve_algorithm(str(exp["run"]))
        exp_config = exp.get("config") or {}
        if not isinstance(exp_config, dict):
            raise CLIError(f"{args.file}: experiment {exp_name!r}: 'config' must be a mapping, got {exp_config!r}")
        exp_config = translate_config(exp_config, f"{args.file}: experiment {exp_name!r}")
        overrides = {**exp_config, **config_override}
        env = exp.get("env") or overrides.get("env")
        config = build_config(algo_cls, env, overrides, num_env_runners=args.num_env_runners, seed=args.seed)
        exp_stop = exp.get("stop") or {}
        if not isinstance(exp_stop, dict):
            raise CLIError(f"{args.file}: experiment {exp_name!r}: 'stop' must be a mapping, got {exp_stop!r}")
        stop = check_stop(
            {**normalize_stop(exp_stop), **normalize_stop(stop_override)},
            f"{args.file}: experiment {exp_name!r} stop (with --stop)",
        )
        prepared.append((exp_name, str(exp["run"]), algo_cls, config, stop))
    init_ray(args.ray_address, args.num_cpus)
    status = 0
    # A tuned example's num_env_runners is its author's suggestion: it is fitted to this machine
    # unless --num-env-runners or a --config JSON asks for a number.
    explicit = args.num_env_runners is not None or explicit_env_runners(args.config)
    for exp_name, algo, algo_cls, config, stop in prepared:
        fit_env_runners(algo, algo_cls, config, explicit=explicit)
        check_resources(algo_cls, config)
        status = max(
            status,
            run_experiment(
                algo,
                config,
                stop,
                name=args.name or exp_name,
                storage_path=args.storage_path,
                num_samples=args.num_samples,
                checkpoint_freq=args.checkpoint_freq,
                checkpoint_at_end=args.checkpoint_at_end,
            ),
        )
    return status


def find_checkpoint(path: str) -> str:
    """An algorithm checkpoint dir: ``path`` itself, or the newest ``checkpoint_*`` below it."""
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(path):
        raise CLIError(f"checkpoint path does not exist: {path}")
    if os.path.isfile(os.path.join(path, "rllib_checkpoint.json")):
        return path
    found = []
    for root, dirs, files in os.walk(path):
        if "rllib_checkpoint.json" in files and os.path.basename(root).startswith("checkpoint_"):
            found.append(root)
            dirs[:] = []
    if not found:
        raise CLIError(f"no RLlib checkpoint in {path} (expected rllib_checkpoint.json or checkpoint_*/)")
    return max(found, key=os.path.getmtime)


def load_checkpoint_config(checkpoint: str):
    """(Algorithm class, a fresh unfrozen config) as saved in an RLlib checkpoint dir."""
    import pickle

    try:
        with open(os.path.join(checkpoint, "class_and_ctor_args.pkl"), "rb") as f:
            saved = pickle.load(f)
        algo_cls = saved["class"]
        config_dict = saved["ctor_args_and_kwargs"][0][0]
    except Exception as e:
        raise CLIError(f"cannot read the algorithm config in {checkpoint}: {_first_line(e)}") from None
    config = algo_cls.get_default_config()
    config = (
        config.update_from_dict(config_dict) if isinstance(config_dict, dict) else config_dict.copy(copy_frozen=False)
    )
    return algo_cls, config


def cmd_evaluate(args) -> int:
    import numpy as np

    if args.episodes < 1:
        raise CLIError(f"--episodes must be >= 1, got {args.episodes}")
    checkpoint = find_checkpoint(args.checkpoint)
    if args.env:
        check_env_id(args.env)
    algo_cls, config = load_checkpoint_config(checkpoint)
    # Restore into a driver-only copy (no remote env runners, no evaluation workers): evaluating
    # must not depend on the cluster the run was trained on.
    config.env_runners(num_env_runners=0, num_envs_per_env_runner=1, create_local_env_runner=True)
    config.evaluation(evaluation_interval=None, evaluation_num_env_runners=0)
    if args.env:
        config.environment(args.env)
    # RLlib re-seeds its env with config.seed at *every* sample(num_episodes=...) call, which would
    # replay one episode N times; instead the env is seeded once below and then runs on.
    config.debugging(seed=None)
    init_ray(args.ray_address, args.num_cpus)
    print(f"rllib: restoring {checkpoint}", flush=True)
    try:
        algo = config.build_algo()
    except Exception as e:
        raise CLIError(f"could not rebuild {algo_cls.__name__} from {checkpoint}: {_first_line(e)}") from None
    try:
        algo.restore_from_path(checkpoint)
        runner = algo.env_runner
        if args.seed is not None:
            runner.env.reset(seed=args.seed)
        returns, lengths = [], []
        for i in range(args.episodes):
            episodes = runner.sample(num_episodes=1, explore=False)
            ret = float(sum(ep.get_return() for ep in episodes))
            length = int(sum(len(ep) for ep in episodes))
            returns.append(ret)
            lengths.append(length)
            print(f"episode {i + 1}/{args.episodes}: return {ret:.2f}, length {length}", flush=True)
    finally:
        algo.stop()
    print(
        f"rllib: {algo.__class__.__name__} on {config.env}: mean return {np.mean(returns):.2f} "
        f"+- {np.std(returns):.2f} over {len(returns)} episodes (mean length {np.mean(lengths):.1f})"
    )
    return 0


def cmd_list(args) -> int:
    from rllib_ext import registry

    errors = registry.import_errors()
    print("rllib_ext algorithms:")
    if not registry.ALGORITHMS:
        print("  (none yet)")
    for name, spec in sorted(registry.ALGORITHMS.items()):
        broken = f"  [BROKEN: {errors[name]}]" if name in errors else ""
        print(f"  {name:<12} paper {spec.paper}  {spec.summary}{broken}")
    print("RLlib built-ins (same CLI, for side-by-side runs):")
    print("  " + ", ".join(registry.rllib_builtin_names()))
    print("Environments registered by rllib_ext: " + ", ".join(sorted(registry.ENVS)))
    return 1 if errors else 0


def cmd_plot(args) -> int:
    from rllib_ext.plotting import plot_runs

    metric = METRIC_ALIASES.get(args.metric, args.metric)
    try:
        out = plot_runs(
            args.run_dirs, out=args.output, metric=metric, x=args.x, aggregate=args.aggregate, source=args.source
        )
    except (FileNotFoundError, ValueError) as e:
        raise CLIError(str(e)) from None
    print(f"rllib: wrote {out}")
    return 0


# ---------------------------------------------------------------------------------------------
# Parsers.
# ---------------------------------------------------------------------------------------------
def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        action="append",
        help="config overrides: a JSON object like '{\"lr\": 0.001}', or @FILE.yaml (e.g. @configs/es.yaml); "
        'may be repeated, later ones win (--config @configs/cemrl.yaml --config \'{"mode": "parallel"}\')',
    )
    p.add_argument("--stop", help="JSON stop criteria, e.g. '{\"training_iteration\": 10}'")
    p.add_argument("--num-samples", type=int, default=1, help="Tune samples per experiment")
    p.add_argument("--storage-path", help="where results go (default ~/ray_results)")
    p.add_argument("--name", help="experiment name (default ALGO_ENV_DATE)")
    p.add_argument("--checkpoint-freq", type=int, default=0, help="checkpoint every N iterations")
    p.add_argument("--checkpoint-at-end", action="store_true", help="checkpoint when the run stops")
    p.add_argument("--seed", type=int, help="config.debugging(seed=...)")
    p.add_argument(
        "--num-env-runners",
        type=int,
        help="config.env_runners(num_env_runners=...); without it, the algorithm's number is fitted to the free CPUs",
    )
    _add_ray_options(p)


def _add_ray_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ray-address", help="connect to a running Ray cluster ('auto' or HOST:PORT)")
    p.add_argument("--num-cpus", type=int, help="CPUs for a local Ray (default: all cores)")
    p.add_argument("--verbose", action="store_true", help="show Ray's and RLlib's known noise too (hidden by default)")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rllib",
        description="Train, evaluate and plot rllib_ext and RLlib algorithms through Ray Tune.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train", help="train an algorithm (or: rllib train file FILE.yaml)")
    p.add_argument("--algo", "--run", dest="algo", required=True, help="algorithm name (rllib list)")
    p.add_argument("--env", help="gymnasium env id or a name registered with Tune")
    _add_run_options(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("evaluate", help="evaluate a checkpoint with deterministic actions")
    p.add_argument("checkpoint", help="checkpoint dir (or a trial/experiment dir: newest checkpoint)")
    p.add_argument("--env", help="evaluate on this env instead of the training env")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--seed", type=int)
    _add_ray_options(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("list", help="registered algorithms")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("plot", help="learning curves PNG from one or more run directories")
    p.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        help="experiment or trial dir; several dirs are groups, each drawn as mean (or IQM) with a 95%% CI band",
    )
    p.add_argument(
        "-o", "--output", help="PNG path (default RUN_DIR/learning_curve.png; ./learning_curves.png for several)"
    )
    p.add_argument("--metric", default=RETURN_KEY, help=f"any key a run reported, '/'-separated (default {RETURN_KEY})")
    p.add_argument("--x", choices=["env_steps", "time", "iteration"], default="env_steps", help="x axis")
    p.add_argument(
        "--aggregate",
        choices=["auto", "none", "mean", "iqm"],
        default="auto",
        help="a line per trial (none), or per directory with a CI band (mean, iqm); auto: none for one dir, "
        "mean for several",
    )
    p.add_argument(
        "--source",
        choices=["auto", "result.json", "progress.csv", "tfevents"],
        default="auto",
        help="what to read (auto: result.json, else progress.csv, else event files)",
    )
    p.set_defaults(func=cmd_plot)
    return parser


def make_train_file_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rllib train file", description="Run a tuned example (RLlib's YAML format).")
    p.add_argument("file", help="YAML: {name: {run, env, stop, config}}")
    _add_run_options(p)
    p.set_defaults(func=cmd_train_file)
    return p


# The noise filter of the running command (None with --verbose); init_ray re-applies it to the
# log handlers ray.init adds.
_QUIET = None
# Whether this run's init_ray started (or connected) Ray: then main disconnects it before it exits.
_STARTED_RAY = False


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rllib`` console script; returns the exit status."""
    global _QUIET
    from rllib_ext.quiet import Quiet

    # Our progress line replaces Tune's tables.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["train", "file"]:
        parser = make_train_file_parser()
        args = parser.parse_args(argv[2:])
    else:
        parser = make_parser()
        args = parser.parse_args(argv)
    _QUIET = None if getattr(args, "verbose", False) else Quiet().install()
    try:
        return args.func(args)
    except CLIError as e:
        print(f"rllib: error: {e}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        print("rllib: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into a command that stopped reading (`rllib list | head`): not an error.
        # Point stdout at /dev/null so that the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno())
        return 0
    finally:
        shutdown_ray()
        if _QUIET is not None:
            _QUIET.uninstall()
            if _QUIET.hidden:
                print(
                    f"rllib: hid {_QUIET.hidden} lines of known framework noise (--verbose shows them)", file=sys.stderr
                )
            _QUIET = None


if __name__ == "__main__":
    sys.exit(main())
