"""The ``rllib`` command: train (``--resume``), train file, evaluate, list, plot, race, report.

Ray 2.60 ships no ``rllib`` console script; this one keeps the spellings old-RLlib users know
(``rllib train --algo PPO --env CartPole-v1 --stop '{...}' --config '{...}'`` and
``rllib train file X.yaml``). It is written with :mod:`argparse`: the standard library covers
every option here, so the package gains no dependency and ``--help`` is free.

This module holds the command line, the output and the exit codes only; the work is done by
:mod:`rllib_ext.experiment`. Every check of user input (algorithm name, env id, JSON, config
keys, the config's own ``validate()``, a YAML file's shape, a checkpoint path) runs before Ray
starts; a failure (an :class:`~rllib_ext.experiment.ExperimentError`, or a :class:`CLIError` of
the command itself) prints one ``rllib: error: ...`` line and exits with status 2. Training runs
through Tune, so TensorBoard event files, ``progress.csv`` and checkpoints come from Tune.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from rllib_ext import experiment
from rllib_ext.compare.race import RaceError
from rllib_ext.compare.rows import RowError
from rllib_ext.experiment import (
    METRIC_ALIASES,
    RETURN_KEY,
    STEPS_KEY,
    ExperimentError,
    build_config,
    check_env_id,
    check_resources,
    check_stop,
    find_checkpoint,
    first_line,
    fit_env_runners,
    load_checkpoint_config,
    load_experiments,
    normalize_stop,
    parse_json_dict,
    resolve_algorithm,
    translate_config,
)

USAGE_ERROR = 2
RUN_FAILED = 1
#: Stopped by Ctrl-C (the shell's 128 + SIGINT); ``rllib train --resume`` goes on.
INTERRUPTED = 130
#: ``rllib race --stop-after-s`` stopped before the race was complete (``--resume`` goes on).
RACE_PAUSED = 3


class CLIError(Exception):
    """Bad user input found by the command itself: printed as one line, exit status 2 (as is an
    :class:`~rllib_ext.experiment.ExperimentError` from the library)."""


def _note(line: str) -> None:
    print(f"rllib: note: {line}", file=sys.stderr)


def _warn(line: str) -> None:
    print(f"rllib: warning: {line}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Input checks (no Ray needed).
# ---------------------------------------------------------------------------------------------
def parse_config_options(values: list[str] | None) -> dict[str, Any]:
    """Merges repeated ``--config`` options (JSON or @FILE.yaml) in order; later keys win.

    Old RLlib keys are renamed (one ``rllib: note:`` line each) or rejected, see :mod:`rllib_ext.legacy`.
    """
    merged: dict[str, Any] = {}
    for text in values or []:
        where = f"--config {text}" if text.startswith("@") else "--config"
        merged.update(translate_config(parse_json_dict(text, "--config"), where, notice=_note))
    return merged


def explicit_env_runners(values: list[str] | None) -> bool:
    """Whether a ``--config`` JSON (not an @FILE) sets the number of env runners itself."""
    from rllib_ext.legacy import RENAMED

    keys = {"num_env_runners"} | {old for old, new in RENAMED.items() if new == "num_env_runners"}
    return any(not text.startswith("@") and keys & set(parse_json_dict(text, "--config")) for text in values or [])


# ---------------------------------------------------------------------------------------------
# Ray / Tune.
# ---------------------------------------------------------------------------------------------
def init_ray(address: str | None, num_cpus: int | None) -> None:
    """:func:`rllib_ext.experiment.init_ray`, remembering whether this run started Ray, with the
    noise filter re-applied to the log handlers ``ray.init`` adds."""
    global _STARTED_RAY
    if experiment.init_ray(address, num_cpus):
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


def describe_fit(algo: str, fit: experiment.RunnerFit) -> str:
    """The line that says how many env runners :func:`~rllib_ext.experiment.fit_env_runners` chose."""
    return (
        f"rllib: {algo}: {fit.fitted} env runner(s) instead of {fit.wanted} ({fit.wanted} would need "
        f"{fit.cpus_wanted:g} CPUs, the cluster has {fit.room}; --num-env-runners N chooses)"
    )


def fit_to_cluster(algo: str, algo_cls, config, *, explicit: bool) -> None:
    """Fits the env runners to the free CPUs (one line if their number changed), then checks that
    one trial fits the cluster at all."""
    fit = fit_env_runners(algo, algo_cls, config, explicit=explicit)
    if fit is not None:
        print(describe_fit(algo, fit), file=sys.stderr, flush=True)
    check_resources(algo_cls, config)


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
    keep_checkpoints: int | None = None,
) -> int:
    """Runs one Tune experiment with a progress line per iteration; returns the exit status."""
    tuner, logdir = experiment.make_tuner(
        algo,
        config,
        stop,
        name=name,
        storage_path=storage_path,
        num_samples=num_samples,
        checkpoint_freq=checkpoint_freq,
        checkpoint_at_end=checkpoint_at_end,
        keep_checkpoints=keep_checkpoints,
        callbacks=[_progress_callback()],
        warn=_warn,
    )
    print(f"rllib: training {algo} on {config.env}; TensorBoard: tensorboard --logdir {logdir}", flush=True)
    return fit(tuner, logdir)


def fit(tuner, logdir: str) -> int:
    """Runs a Tune experiment (new or resumed) and prints a line per trial; returns the exit status
    (130 when it was interrupted: the line says how to go on)."""
    results = tuner.fit()
    status = 0
    for result in results:
        trial_dir = result.path
        if result.error is not None:
            status = RUN_FAILED
            print(f"rllib: trial in {trial_dir} failed: {first_line(result.error)}", file=sys.stderr)
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
    if experiment.unfinished_trials(logdir):  # Ctrl-C: Tune stopped the run and saved its state
        print(f"rllib: interrupted; go on with: rllib train --resume {logdir}", file=sys.stderr, flush=True)
        return INTERRUPTED
    return status


# ---------------------------------------------------------------------------------------------
# Commands.
# ---------------------------------------------------------------------------------------------
#: Options of ``rllib train`` that ``--resume`` may come with (the rest is the experiment's, as saved).
RESUME_OPTIONS = ("resume", "storage_path", "ray_address", "num_cpus", "verbose")


def cmd_resume(args) -> int:
    """``rllib train --resume PATH``: an interrupted experiment goes on from its last checkpoints."""
    defaults = make_parser().parse_args(["train"])
    given = [
        "--" + k.replace("_", "-")
        for k, v in vars(args).items()
        if k not in (*RESUME_OPTIONS, "func", "command") and v != getattr(defaults, k, None)
    ]
    if given:
        raise CLIError(
            f"--resume goes on with the experiment as it was started (its algorithm, config, stop criteria and "
            f"checkpoints are saved with it): drop {', '.join(given)}"
        )
    logdir = experiment.find_experiment(args.resume, args.storage_path)  # a bad path fails before Ray starts
    init_ray(args.ray_address, args.num_cpus)
    tuner, logdir, algo = experiment.resume(logdir)
    print(f"rllib: resuming {algo} from {logdir}; TensorBoard: tensorboard --logdir {logdir}", flush=True)
    return fit(tuner, logdir)


def cmd_train(args) -> int:
    if args.resume:
        return cmd_resume(args)
    if not args.algo:
        raise CLIError("rllib train needs --algo NAME (or --resume EXPERIMENT_DIR to go on with one)")
    algo_cls = resolve_algorithm(args.algo)
    overrides = parse_config_options(args.config)
    stop = check_stop(parse_json_dict(args.stop, "--stop"), "--stop")
    config = build_config(algo_cls, args.env, overrides, num_env_runners=args.num_env_runners, seed=args.seed)
    init_ray(args.ray_address, args.num_cpus)
    explicit = args.num_env_runners is not None or explicit_env_runners(args.config)
    fit_to_cluster(args.algo, algo_cls, config, explicit=explicit)
    return run_experiment(
        args.algo,
        config,
        stop,
        name=args.name,
        storage_path=args.storage_path,
        num_samples=args.num_samples,
        checkpoint_freq=args.checkpoint_freq,
        checkpoint_at_end=args.checkpoint_at_end,
        keep_checkpoints=args.keep_checkpoints or None,
    )


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
        exp_config = translate_config(exp_config, f"{args.file}: experiment {exp_name!r}", notice=_note)
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
        fit_to_cluster(algo, algo_cls, config, explicit=explicit)
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
                keep_checkpoints=args.keep_checkpoints or None,
            ),
        )
    return status


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
        raise CLIError(f"could not rebuild {algo_cls.__name__} from {checkpoint}: {first_line(e)}") from None
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


def cmd_race(args) -> int:
    """``rllib race``: checks everything before Ray starts, prints the plan, runs the missing runs."""
    from rllib_ext.compare import race

    spec, own = args.race_spec
    prepared = race.prepare(spec, own)
    for line in prepared.plan_lines():
        print(f"rllib race: {line}", flush=True)
    if spec.dry_run:
        return 0
    race.set_threads(spec.threads)  # before Ray starts: its workers inherit OMP_NUM_THREADS
    init_ray(None, spec.num_cpus)
    try:
        out = race.run(prepared, log=lambda line: print(line, flush=True))
    except race.RunPaused:
        print(f"rllib race: stopped after {spec.stop_after_s:g} s; go on with --resume", flush=True)
        return RACE_PAUSED
    print(f"rllib race: wrote {out}; rllib report {spec.results_dir} draws it", flush=True)
    return 0


def cmd_report(args) -> int:
    """``rllib report``: figures and the Markdown summary of every race under a results folder."""
    from rllib_ext.compare.report import write_report

    try:
        report = write_report(args.results_dir, figures_dir=args.figures_dir, output=args.output)
    except FileNotFoundError as e:
        raise CLIError(str(e)) from None
    figures = sorted(set(report.figures.values()))
    print(
        f"rllib: {len(report.rows)} rows -> {len(figures)} figure(s) ({', '.join(figures) or 'none'}); "
        f"summary in {report.path}"
    )
    return 0


# ---------------------------------------------------------------------------------------------
# Parsers.
# ---------------------------------------------------------------------------------------------
#: Iterations between the checkpoints of ``rllib train`` unless ``--checkpoint-freq`` says otherwise:
#: an interrupted run loses at most this many iterations when resumed.
DEFAULT_CHECKPOINT_FREQ = 10
#: Checkpoints of a trial kept by ``rllib train`` (the newest): a long run with replay checkpoints
#: would otherwise fill the disk.
DEFAULT_KEEP_CHECKPOINTS = 2


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
    p.add_argument(
        "--checkpoint-freq",
        type=int,
        default=DEFAULT_CHECKPOINT_FREQ,
        help=f"checkpoint every N iterations (default {DEFAULT_CHECKPOINT_FREQ}: what rllib train --resume goes on "
        "from; 0: never)",
    )
    p.add_argument("--checkpoint-at-end", action="store_true", help="checkpoint when the run stops")
    p.add_argument(
        "--keep-checkpoints",
        type=int,
        default=DEFAULT_KEEP_CHECKPOINTS,
        help=f"checkpoints kept per trial, the newest (default {DEFAULT_KEEP_CHECKPOINTS}; 0: all)",
    )
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
    p.add_argument("--algo", "--run", dest="algo", help="algorithm name (rllib list)")
    p.add_argument("--env", help="gymnasium env id or a name registered with Tune")
    p.add_argument(
        "--resume",
        metavar="EXPERIMENT",
        help="go on with an interrupted experiment (Ctrl-C, or its driver killed) from its last checkpoints: "
        "the folder rllib train printed ('results in ...'), or its name under --storage-path",
    )
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

    # `rllib race ...` is parsed by make_race_parser (main hands it over): listed here for --help.
    sub.add_parser("race", help="race algorithms on equal terms: one row per run (rllib race --help)", add_help=False)

    p = sub.add_parser("report", help="figures and a Markdown summary of the races in a results folder")
    p.add_argument("results_dir", metavar="RESULTS_DIR", help="the folder rllib race wrote (its --results-dir)")
    p.add_argument("--figures-dir", help="where the PNGs go (default RESULTS_DIR/figures)")
    p.add_argument("-o", "--output", help="the Markdown summary (default RESULTS_DIR/REPORT.md)")
    p.set_defaults(func=cmd_report)
    return parser


def _add_race_options(p: argparse.ArgumentParser, results_dir: str) -> None:
    from rllib_ext.compare.race import DEFAULT_EVAL_EVERY_ENV_STEPS

    p.add_argument(
        "--algos",
        nargs="+",
        required=True,
        metavar="[LABEL=]NAME",
        help="registered names (rllib list; RLlib's built-ins too), each optionally under a unique label naming "
        "the entry in --set, the log and the rows, e.g. IMPACT_EXT APPO, or DFD+DSGD=DFD_EXT DFD+Adam=DFD_EXT",
    )
    p.add_argument("--env", required=True, help="gymnasium env id")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    p.add_argument("--budget-env-steps", type=int, help="stop a run at this many env steps sampled")
    p.add_argument("--budget-s", type=float, help="stop a run after this many seconds in train()")
    p.add_argument(
        "--eval-every-steps",
        "--eval-every-env-steps",
        dest="eval_every_env_steps",
        type=int,
        default=DEFAULT_EVAL_EVERY_ENV_STEPS,
        help=f"env steps between evaluation points (default {DEFAULT_EVAL_EVERY_ENV_STEPS}, for small tasks)",
    )
    p.add_argument("--eval-episodes", type=int, default=5)
    p.add_argument("--common", default="{}", help="JSON config applied to every algorithm (network, runners, sampler)")
    p.add_argument(
        "--set", dest="sets", action="append", default=[], metavar="LABEL:KEY=JSON", help="an entry's own setting"
    )
    p.add_argument(
        "--variable", action="append", default=[], metavar="KEY", help="a setting the race varies on purpose"
    )
    p.add_argument(
        "--record",
        action="append",
        default=[],
        metavar="KEY",
        help="a metric of the train() result kept at each evaluation point (row extra.recorded[KEY]), a "
        "'/'-separated path: the black-box family logs under blackbox/ (e.g. blackbox/eta_u with "
        "optimizer dsgd, blackbox/grad_norm, blackbox/update_index), RLlib's learners under "
        "learners/default_policy/...",
    )
    p.add_argument("--target", type=float, help="return counted as solved (time and env steps to it are reported)")
    p.add_argument("--benchmark", default="race", help="folder under --results-dir")
    p.add_argument("--race", help="race id and file name (default: the UTC date and time)")
    p.add_argument("--results-dir", default=results_dir, help=f"where the rows go (default {results_dir})")
    p.add_argument("--num-cpus", type=int, help="CPUs of the local Ray (default: all cores)")
    p.add_argument("--threads", type=int, default=1, help="torch/OMP threads (driver, workers, torch_num_threads)")
    p.add_argument(
        "--append",
        action="store_true",
        help="add runs (more seeds, or more algorithms) to an existing race; refused unless the protocol, "
        "the machine and each algorithm's settings equal its rows', and for an (algorithm, seed) that has a row",
    )
    p.add_argument(
        "--stop-after-s",
        type=float,
        help="stop this invocation after this many seconds (wall clock, from its start): the run in progress "
        "pauses at its next iteration, saving a checkpoint and its curve, and the exit status is 3; the same "
        "command with --resume goes on (for machines that limit a command's time)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="go on with a race: skip the (algorithm, seed) runs that have a row, resume a paused run from "
        "its checkpoint, start the others; the same checks as --append",
    )
    p.add_argument(
        "--other-machine",
        action="store_true",
        help="let --append/--resume join rows run on another machine (CPU model or core count): for a race "
        "with an env-step budget alone. Each row keeps its machine; the report then calls the race comparable "
        "per env step, and says its wall times are not",
    )
    p.add_argument("--dry-run", action="store_true", help="check everything, print the plan, run nothing")
    p.add_argument("--verbose", action="store_true", help="show Ray's and RLlib's known noise too (hidden by default)")
    g = p.add_argument_group("tuning (equal effort for every entry; the rows record the rule: grid, matched or none)")
    g.add_argument(
        "--tune",
        action="append",
        default=[],
        metavar="LABEL:KEY=[V1,V2,...]",
        help="a tuning grid: the entry's points are the product of its keys' JSON values (repeat for a second "
        "key); each point runs on --tune-seeds first, the best (IQM of the final evaluation return; ties: higher "
        "worst seed, then grid order) then on --seeds. Grids must be of equal size across the entries",
    )
    g.add_argument(
        "--tune-seeds",
        nargs="+",
        type=int,
        help="tuning seeds, disjoint from --seeds (default: two, from 1000)",
    )
    g.add_argument(
        "--allow-unequal-tuning",
        action="store_true",
        help="accept grids of unequal size (an entry without --tune is a grid of 1); the report names them",
    )
    g.add_argument(
        "--matched",
        action="append",
        default=[],
        metavar="TARGET:SOURCE",
        help="set TARGET's own settings from SOURCE's by a paper's mapping: APPO:IMPACT_EXT (M, N, K, lr, clip, KL, "
        "target period in APPO's units) or PPO:IMPACT_EXT (train batch N·M, minibatch M, K epochs); see "
        "rllib_ext/compare/matched.py",
    )


RACE_DESCRIPTION = (
    "Race algorithms with identical shared settings (checked before any run), interleaved seeds and "
    "deterministic evaluation; append one row per run (rllib report draws them)."
)


def make_race_parser(prog: str = "rllib race", results_dir: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``rllib race`` (also under another ``prog``, with another default results folder)."""
    from rllib_ext.compare.race import RESULTS_DIR

    p = argparse.ArgumentParser(prog=prog, description=RACE_DESCRIPTION)
    _add_race_options(p, results_dir or RESULTS_DIR)
    p.set_defaults(func=cmd_race)
    return p


def parse_race_args(
    argv: Sequence[str], prog: str = "rllib race", results_dir: str | None = None
) -> argparse.Namespace:
    """``rllib race``'s arguments, with ``race_spec``: ``(spec, own)`` from
    :func:`rllib_ext.compare.race.race_spec`; bad options are usage errors (SystemExit 2, the
    message on stderr)."""
    from rllib_ext.compare import race

    parser = make_race_parser(prog, results_dir)
    args = parser.parse_args(argv)
    options = {k: v for k, v in vars(args).items() if k not in ("func", "verbose")}
    try:
        args.race_spec = race.race_spec(**options, command_line=race.command_line(prog, argv))
    except RaceError as e:
        parser.error(str(e))
    return args


def race_main(argv: Sequence[str], prog: str = "rllib race", results_dir: str | None = None) -> int:
    """``rllib race ARGS``, also under another name (the project's ``python -m benchmarks.harness.race``,
    whose rows go to ``benchmarks/results/`` and record that command); returns the exit status."""
    return run_command(parse_race_args(argv, prog, results_dir))


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
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["train", "file"]:
        args = make_train_file_parser().parse_args(argv[2:])
    elif argv[:1] == ["race"]:
        return race_main(argv[1:])
    else:
        args = make_parser().parse_args(argv)
    return run_command(args)


def run_command(args: argparse.Namespace) -> int:
    """Runs a parsed command with the noise filter on (unless ``--verbose``): a usage error is one
    ``rllib: error:`` line and status 2, Ctrl-C status 130; Ray is disconnected at the end."""
    global _QUIET
    from rllib_ext.quiet import Quiet

    # Our progress line replaces Tune's tables.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    _QUIET = None if getattr(args, "verbose", False) else Quiet().install()
    try:
        return args.func(args)
    except (CLIError, ExperimentError, RaceError, RowError) as e:
        print(f"rllib: error: {e}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        print("rllib: interrupted", file=sys.stderr)
        return INTERRUPTED
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
