"""A race: several algorithms, the same env, the same shared settings, ≥ 5 seeds, evaluation returns.

The library under ``rllib race`` (:mod:`rllib_ext.cli` holds the command line, the output and the
exit codes): :func:`race_spec` checks the options, :func:`prepare` builds and checks every entry
before Ray starts, :func:`run` trains the runs and appends their rows. Nothing here prints or
exits; bad input raises :class:`RaceError` with one line naming the entry or setting at fault.
Any registered name races, RLlib's built-ins included::

    rllib race --algos IMPACT_EXT APPO --env CartPole-v1 --seeds 0 1 2 3 4 \\
        --budget-env-steps 40000 [--budget-s 90] --eval-every-env-steps 5000 --eval-episodes 5 \\
        --common '{"model_config": {"fcnet_hiddens": [64, 64]}, "num_env_runners": 1, ...}' \\
        --set IMPACT_EXT:circular_buffer_iterations_per_batch=8 ... [--target 450]

Variants of one registered algorithm race under labels (``LABEL=NAME``; a plain ``NAME`` is
``NAME=NAME``), and ``--record`` keeps metrics of the ``train()`` result along the curve::

    rllib race --benchmark dfd_ablation --env CartPole-v1 \\
        --algos "DFD+DSGD=DFD_EXT" "DFD+Adam=DFD_EXT" "FD+DSGD=DFD_EXT" "ES=ES_EXT" \\
        --common '{"policy_hiddens": [32], "num_env_runners": 1, "eval_episodes": 10}' \\
        --set 'DFD+DSGD:optimizer="dsgd"' --set 'FD+DSGD:optimizer="dsgd"' \\
        --set FD+DSGD:delayed_returns=false --record blackbox/eta_u \\
        --budget-env-steps 200000 --eval-every-env-steps 20000

The label is the entry's name everywhere: in ``--set LABEL:KEY=JSON``, the log, the row's
``algorithm`` (so the report groups by it) and the error messages; labels are unique, a name may
appear under several. The registered name is resolved through the registry and recorded in the
row's ``settings["registered_algorithm"]``.

Runs are interleaved (for each seed, every algorithm in turn), so a change in the machine's load
hits every algorithm alike. Each run is built through the registry
(:func:`rllib_ext.registry.resolve_algorithm_class`) from the algorithm's default config, the
``--common`` values (applied to every algorithm) and the algorithm's own ``--set`` values, and
trained with ``algo.train()`` until the env-step or wall-clock budget (whichever comes first).
The env-step budget is on ``env_runners/num_env_steps_sampled_lifetime``: every env step the
algorithm simulates, in every family (its perturbations, its own evaluation episodes, AES-RL's μ
re-evaluations, warm-up, dropped and failed episodes; design.md, convention 12); the race's own
evaluation episodes are not in it.
Every ``--eval-every-env-steps`` env steps (and before training, and at the end) the current
policy plays ``--eval-episodes`` episodes with deterministic actions; the mean return is the
curve's point. Wall time counts ``train()`` only (not building, not evaluating). Each finished run
is appended as one row (:mod:`rllib_ext.compare.rows`) to
``<results-dir>/<benchmark>/<race>.jsonl``; ``rllib report`` (:mod:`rllib_ext.compare.report`)
draws the figures and the table.

Along the curve (lists aligned with its points) the row's ``extra`` keeps:
``train_return_mean`` (``env_runners/episode_return_mean`` of the latest ``train()``),
``recorded[KEY]`` for each ``--record KEY`` (a '/'-separated path into the latest ``train()``
result; the black-box family logs its own metrics at top level under ``blackbox/``, e.g.
``blackbox/eta_u`` with the ``dsgd`` optimizer, ``blackbox/grad_norm``; RLlib's learners under
``learners/default_policy/...``), and, for algorithms with an integer ``update_index`` (the
black-box family), ``updates``: the updates computed so far. A missing or non-finite value, and
every ``train()`` metric at the pre-training point, is null. The row itself says how its steps
were counted (``step_count``: every simulated step) and keeps, at each curve point, where they
went: ``env_steps_breakdown`` (``env_runners/env_steps_used_lifetime``, ``..._evaluation_...``,
``..._wasted_...``, ``env_steps_pending``; :mod:`rllib_ext.common.steps`), null where the result has
none.

Like with like, checked before any run starts (one error naming the setting):

- a ``--set`` may not override a ``--common`` key (declare a deliberate difference with
  ``--variable KEY``);
- the execution settings (:data:`EXECUTION_KEYS`: env runners, envs per runner, fragment length,
  learners, CPUs per runner, iteration time), read back from each built config, must be equal
  across the algorithms; put them in ``--common``;
- with two or more algorithms the network must be set in ``--common`` (``model_config``, or
  ``policy_hiddens`` for the black-box family);
- ``--threads`` (default 1) sets torch's threads in the driver (the local learner and the
  evaluation run there), ``OMP_NUM_THREADS`` of every worker, and ``torch_num_threads`` of the
  algorithms that have it.

Long races in short commands (a machine that limits a command to 10 minutes): ``--stop-after-s
S`` stops an invocation after S seconds; the run in progress pauses at its next iteration, saving
its checkpoint and its curve so far under ``<results>/<benchmark>/<race>.partial/``, and the exit
status is 3. The same command with ``--resume`` skips the runs that have a row, restores the
paused run (``Algorithm.from_checkpoint``) and goes on; a finished row counts its invocations in
``extra["chunks"]``. Wall time stays ``train()`` time, summed over the chunks. What a checkpoint
does not hold starts afresh at a resume: RLlib's off-policy learners (SAC, ...) refill their replay,
so such a chunked run is not the same run as an unbroken one. rllib_ext's replay learners (TD3_EXT,
AESRL_EXT, CEMRL_EXT, VRACER_EXT, DDPG_EXT, NAF_EXT) keep theirs with ``checkpoint_replay: true``:
set it in ``--common`` for a chunked race.

Evaluation (one path per family, both on the driver, both deterministic):

- Algorithms on RLlib's env runners (IMPACT_EXT, APPO, PPO, VRACER_EXT, DDPG_EXT, NAF_EXT,
  TD3_EXT, ...): RLlib's evaluation env runner in the driver (``config.evaluation(
  evaluation_num_env_runners=0, ...)``, with an ``evaluation_interval`` so large that ``train()``
  never evaluates by itself). Before each evaluation the runner gets the learner's weights and the
  connector states as ``Algorithm.evaluate()`` syncs them; it then plays the episodes with
  ``sample(num_episodes=K, explore=False)``. (``Algorithm.evaluate()`` itself is not used: its
  returns are smoothed over the last 100 evaluation episodes, which mixes evaluation points.)
- The black-box family (ES_EXT, DFD_EXT, CVES_EXT, AESRL_EXT, CEMRL_EXT): the algorithm's local
  lean env runner, which the driver keeps at the current θ_u (or μ) and observation filter
  (``BlackBoxAlgorithm.publish``); ``sample(num_episodes=K, explore=False)`` plays θ_u without
  perturbation. Their own ``eval_episodes`` (``blackbox/eval_return_mean``) costs runner time
  inside the budget and is left as the algorithm sets it.

Every evaluation of a run plays the same ``--eval-episodes`` start states: RLlib's runner re-seeds
its env from the run's seed at each ``sample(num_episodes=...)``, and the black-box runner's env is
re-seeded likewise. Differences between a run's evaluation points thus come from the policy, not
from the draw of start states (common random numbers); seeds differ in their start states.

Async algorithms' runners may finish the requests already in flight while the driver evaluates
(at most ``max_requests_in_flight_per_env_runner`` fragments per runner).

CPU time: ``curve.cpu_s`` is the driver's process CPU time in ``train()`` (its learner threads
included) plus the CPU time of the run's env runner and learner actors (their processes, read with
psutil from the first ``train()`` on): on a machine whose cores the runners and learner threads
share, it says what wall seconds do not.

Tuning (issue 40; :mod:`rllib_ext.compare.tuning`, :mod:`rllib_ext.compare.matched`): ``--tune
LABEL:KEY=[...]`` gives entries a grid run first on tuning seeds disjoint from the evaluation
seeds (rows ``stage="tuning"``); each entry's best point then runs on the evaluation seeds.
``--matched TARGET:SOURCE`` instead sets the target's own settings from the source's by a
paper's mapping. Every row records the rule in ``tuning["rule"]``: ``grid``, ``matched`` or ``none``.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import math
import numbers
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from rllib_ext.compare import tuning as tuning_lib
from rllib_ext.compare.matched import MatchError, matched_settings
from rllib_ext.compare.rows import (
    EVALUATION,
    EVERY_SIMULATED_STEP,
    OLD_RULE_FAMILY,
    OLD_RULE_LEFT_OUT,
    TUNING,
    Curve,
    Machine,
    RunRow,
    append_row,
    counted_short,
)

logger = logging.getLogger(__name__)

#: Where ``rllib race`` writes its rows unless told (relative to the working directory).
RESULTS_DIR = "race_results"

#: Execution settings every algorithm of a race must share (read back from the built config).
EXECUTION_KEYS = (
    "num_env_runners",
    "num_envs_per_env_runner",
    "rollout_fragment_length",
    "num_learners",
    "num_cpus_per_env_runner",
    "min_time_s_per_iteration",
)
#: Keys that set the network; one of them must be in --common when two or more algorithms race.
NETWORK_KEYS = ("model_config", "policy_hiddens")
#: Added to the run's seed for the black-box family's evaluation episodes.
EVAL_SEED_OFFSET = 10_000
#: An evaluation interval (in iterations) that train() never reaches: evaluation is the race's.
NEVER = 2**62
#: Env steps between evaluation points unless ``--eval-every-steps`` says otherwise (small tasks).
DEFAULT_EVAL_EVERY_ENV_STEPS = 2000


class RaceError(ValueError):
    """Bad race input, found before any run starts; its message is one line naming what is wrong."""


@dataclasses.dataclass
class Entry:
    """One algorithm of the race: its class, validated config and what the race set.

    Attributes:
        label: The race's name of the entry (unique; the registered name unless labelled).
        registered: Registered name (:func:`rllib_ext.registry.resolve_algorithm_class`).
        algo_cls: The Algorithm class.
        config: The validated config (the seed is set per run).
        settings: What the race applied (shared, own, threads) plus the execution settings.
        evaluate: ``f(algo, episodes) -> returns`` with deterministic actions.
    """

    label: str
    registered: str
    algo_cls: Any
    config: Any
    settings: dict[str, Any]
    evaluate: Callable[[Any, int], list[float]]


# ---------------------------------------------------------------------------------------------
# Evaluation.
# ---------------------------------------------------------------------------------------------
def evaluate_on_rllib_runner(algo, episodes: int) -> list[float]:
    """Returns of ``episodes`` deterministic episodes on RLlib's local evaluation env runner."""
    group = algo.eval_env_runner_group
    group.sync_weights(from_worker_or_learner_group=algo.learner_group, inference_only=True)
    if algo.evaluation_config.broadcast_env_runner_states and algo.env_runner is not None:
        group.sync_env_runner_states(
            config=algo.evaluation_config,
            from_worker=algo.env_runner,
            env_to_module=algo.env_to_module_connector,
            module_to_env=algo.module_to_env_connector,
        )
    played = algo.eval_env_runner.sample(num_episodes=episodes, explore=False)
    return [float(ep.get_return()) for ep in played]


def evaluate_on_blackbox_runner(algo, episodes: int) -> list[float]:
    """Returns of ``episodes`` episodes of the unperturbed θ_u on the algorithm's local runner.

    The env is re-seeded from the run's seed first, as RLlib's runner re-seeds itself at every
    ``sample(num_episodes=...)``: every evaluation of a run plays the same start states.
    """
    runner = algo.env_runner
    runner.env.reset(seed=EVAL_SEED_OFFSET + int(algo.config.seed or 0))
    played = runner.sample(num_episodes=episodes, explore=False)
    return [float(ep.get_return()) for ep in played]


def evaluator_for(label: str, algo_cls, config) -> Callable[[Any, int], list[float]]:
    """The evaluation path of an algorithm, or a RaceError naming its label."""
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    from rllib_ext.common.blackbox import BlackBoxAlgorithm

    if issubclass(algo_cls, BlackBoxAlgorithm):
        return evaluate_on_blackbox_runner
    runner_cls = config.env_runner_cls or SingleAgentEnvRunner
    if config.is_multi_agent or not (isinstance(runner_cls, type) and issubclass(runner_cls, SingleAgentEnvRunner)):
        raise RaceError(
            f"{label}: the race cannot evaluate it (env runner {getattr(runner_cls, '__name__', runner_cls)}, "
            f"multi-agent {config.is_multi_agent}); it evaluates single-agent RLlib env runners and the "
            "black-box family"
        )
    config.evaluation(
        evaluation_interval=NEVER,
        evaluation_num_env_runners=0,
        evaluation_duration_unit="episodes",
        evaluation_config={"num_envs_per_env_runner": 1, "explore": False},
    )
    return evaluate_on_rllib_runner


# ---------------------------------------------------------------------------------------------
# Planning: every check before Ray starts.
# ---------------------------------------------------------------------------------------------
def parse_key_json(item: str, flag: str = "--set") -> tuple[str, Any]:
    """One ``KEY=JSON`` item as ``(key, value)``.

    Raises:
        RaceError: Without ``=``, or when the value is not JSON (``flag`` names the option).
    """
    key, sep, value = item.partition("=")
    if not sep:
        raise RaceError(f"{flag} takes KEY=JSON, got {[item]}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError as e:
        raise RaceError(f"{flag} {key}={value}: the value is not JSON ({e.msg})") from None


def parse_algos(items: Sequence[str]) -> dict[str, str]:
    """``LABEL=NAME`` (or ``NAME``, meaning ``NAME=NAME``) items as ``{label: name}``, in order.

    Raises:
        RaceError: For a bad label (empty, or with ':' or whitespace), an empty name or a repeated label.
    """
    algos: dict[str, str] = {}
    for item in items:
        label, sep, name = item.partition("=")
        name = name if sep else label
        if not name or not label or ":" in label or any(c.isspace() for c in label):
            raise RaceError(
                f"--algos takes LABEL=NAME or NAME, the label non-empty without ':' or whitespace, got {item!r}"
            )
        if label in algos:
            raise RaceError(f"--algos labels must not repeat: {label!r} (give each variant its own LABEL=NAME)")
        algos[label] = name
    return algos


def parse_own_settings(items: Sequence[str], labels: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``LABEL:KEY=JSON`` items as ``{label: {key: value}}``.

    Raises:
        RaceError: For a malformed item or a label that is not an entry's.
    """
    own: dict[str, dict[str, Any]] = {label: {} for label in labels}
    for item in items:
        label, sep, rest = item.partition(":")
        if not sep or label not in own:
            raise RaceError(f"--set takes LABEL:KEY=JSON with LABEL one of {list(labels)}, got {item!r}")
        key, value = parse_key_json(rest, flag=f"--set {label}:")
        own[label][key] = value
    return own


def plan(args, own: dict[str, dict[str, Any]]) -> list[Entry]:
    """Builds and validates every entry's config; checks the race compares like with like.

    ``args.algos`` is ``{label: registered name}`` (:func:`parse_algos`), ``own`` is keyed by label.

    Raises:
        RaceError: Naming the entry's label or the setting at fault.
    """
    from rllib_ext import registry
    from rllib_ext.experiment import build_config

    variable = set(args.variable)
    common = args.common
    for label, values in own.items():
        clash = sorted(set(values) & set(common) - variable)
        if clash:
            raise RaceError(
                f"--set {label}:{clash[0]} overrides a --common setting; every algorithm gets the same "
                f"value (declare a deliberate difference with --variable {clash[0]})"
            )
    if len(args.algos) > 1 and not (set(NETWORK_KEYS) & (set(common) | variable)):
        raise RaceError(
            "set the network in --common (model_config, or policy_hiddens for the black-box family) "
            "so that every algorithm gets the same one"
        )
    entries = []
    for label, name in args.algos.items():
        algo_cls: Any = registry.resolve_algorithm_class(name)
        if algo_cls is None:
            raise RaceError(f"{label}: unknown algorithm {name!r}; known: {', '.join(registry.all_names())}")
        overrides = {**common, **own[label]}
        if hasattr(algo_cls.get_default_config(), "torch_num_threads"):
            overrides.setdefault("torch_num_threads", args.threads)
        try:
            config = build_config(algo_cls, args.env, overrides, seed=args.seeds[0])
            evaluate = evaluator_for(label, algo_cls, config)
            config.copy(copy_frozen=False).validate()
        except (ValueError, TypeError) as e:  # ExperimentError is a ValueError
            raise RaceError(f"{label}: {e}") from None
        execution = {key: _jsonable(getattr(config, key, None)) for key in EXECUTION_KEYS}
        settings = {**overrides, "threads": args.threads, **execution, "registered_algorithm": name}
        entries.append(Entry(label, name, algo_cls, config, settings, evaluate))
    for key in EXECUTION_KEYS:
        if key in variable:
            continue
        values = {e.label: e.settings[key] for e in entries}
        if len({json.dumps(v, sort_keys=True) for v in values.values()}) > 1:
            shown = ", ".join(f"{n}={v!r}" for n, v in values.items())
            raise RaceError(f"execution setting {key} differs between the algorithms ({shown}): set it in --common")
    return entries


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


def check_resources(entries: Sequence[Entry]) -> None:
    """Raises RaceError when an algorithm asks for more CPUs than Ray has (it would wait forever)."""
    import ray

    from rllib_ext.experiment import cpus_needed

    have = ray.cluster_resources().get("CPU", 0)
    for e in entries:
        needed = cpus_needed(e.algo_cls, e.config)
        if needed > have:
            raise RaceError(
                f"{e.label} needs {needed:g} CPUs but Ray has {have:g}: lower num_env_runners or raise --num-cpus"
            )


# ---------------------------------------------------------------------------------------------
# Running.
# ---------------------------------------------------------------------------------------------
def env_steps_of(result: dict[str, Any]) -> int:
    """Env steps the algorithm simulated so far (the budget), from a ``train()`` result:
    ``env_runners/num_env_steps_sampled_lifetime``, or its copy at the top level."""
    runners = result.get("env_runners", {})
    for value in (runners.get("num_env_steps_sampled_lifetime"), result.get("num_env_steps_sampled_lifetime")):
        if isinstance(value, (int, float)):
            return int(value)
    raise KeyError("num_env_steps_sampled_lifetime is not in the train() result")


def breakdown_of(result: dict[str, Any]) -> dict[str, int | None]:
    """Where the env steps went (used, evaluation, wasted, pending: ``env_runners/<name>`` of
    :data:`rllib_ext.common.steps.BREAKDOWN_KEYS`), None for each the result lacks."""
    from rllib_ext.common.steps import BREAKDOWN_KEYS

    values = {key: metric_of(result, f"env_runners/{key}") for key in BREAKDOWN_KEYS}
    return {key: None if v is None else int(v) for key, v in values.items()}


def metric_of(result: dict[str, Any], path: str) -> float | None:
    """The value at the '/'-separated ``path`` of a ``train()`` result; None if missing or not finite."""
    value: Any = result
    for key in path.split("/"):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def protocol_of(args) -> dict[str, Any]:
    """The row's ``protocol``: budget and evaluation, the same for every run of a race."""
    return {
        "budget_env_steps": args.budget_env_steps,
        "budget_s": args.budget_s,
        "eval_every_env_steps": args.eval_every_env_steps,
        "eval_episodes": args.eval_episodes,
        "eval_actions": "deterministic",
        "wall_s": "train() only",
    }


def same_json(a: Any, b: Any) -> bool:
    """Whether two settings (or protocols) are equal as the rows store them (JSON, keys sorted)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def check_append(
    path: str,
    entries: Sequence[Entry],
    args,
    resume: bool = False,
    tuning: TuningPlan | None = None,
) -> set[tuple]:
    """Raises RaceError unless the new runs can join the race in ``path``; returns the (label,
    seed) pairs that already have an evaluation row, and the (label, seed, point) triples that
    have a tuning row.

    Every existing row must share this invocation's protocol and machine (the machine may differ
    with ``--other-machine``) and the way env steps are counted (rows of the black-box family or
    the ERL algorithms written before 2026-11-27 counted fewer: new runs never join them), an entry
    that already has rows must have been run with the same settings, and no (algorithm, seed) may
    run twice (with ``resume`` such a pair is skipped instead). The rows must have been tuned by
    the same rule (``tuning``'s, default none); a tuning row's settings must be its grid point's, an
    evaluation row's one of its entry's points'.
    """
    from rllib_ext.compare.rows import read_rows

    rows = read_rows(path)
    flag = "--resume" if resume else "--append"
    protocol, machine = protocol_of(args), Machine.this()
    by_label = {e.label: e for e in entries}
    rule = tuning_lib.NONE if tuning is None else tuning.rule
    for row in rows:
        row_rule = (row.tuning or {}).get("rule", tuning_lib.NONE)
        if row_rule != rule:
            raise RaceError(f"{flag}: {path} was tuned by rule {row_rule!r}, this invocation's rule is {rule!r}")
        if counted_short(row):
            family = OLD_RULE_FAMILY[row.registered_algorithm]
            raise RaceError(
                f"{flag}: {path} was counted before 2026-11-27: its {row.algorithm} rows left out "
                f"{OLD_RULE_LEFT_OUT[family]}, new runs count every simulated step; the two do not mix in one "
                "race: give a new --race"
            )
        if row.protocol != protocol:
            raise RaceError(f"{flag}: {path} was run with protocol {row.protocol}, this invocation has {protocol}")
        if row.machine != machine and not args.other_machine:
            raise RaceError(
                f"{flag}: {path} was run on {row.machine}, this machine is {machine} (--other-machine "
                "joins them when the race is compared per env step)"
            )
        entry = by_label.get(row.algorithm)
        if entry is None:
            continue
        points = tuning.points.get(row.algorithm, [entry]) if tuning is not None and tuning.points else [entry]
        if row.stage == TUNING:
            i = int((row.tuning or {}).get("point_index", -1))
            allowed = [points[i].settings] if 0 <= i < len(points) else []
        else:
            allowed = [e.settings for e in points]
        if not any(same_json(row.settings, settings) for settings in allowed):
            raise RaceError(f"{flag}: {row.algorithm}'s settings differ from its rows in {path}")
        if row.stage != TUNING and row.seed in args.seeds and not resume:
            raise RaceError(f"--append: {path} already has {row.algorithm} seed {row.seed}")
    return {run_key(row) for row in rows}


def run_key(row: RunRow) -> tuple:
    """What identifies a run in its race: (label, seed), or (label, seed, grid point) for a tuning run."""
    if row.stage == TUNING:
        return (row.algorithm, row.seed, int((row.tuning or {}).get("point_index", -1)))
    return (row.algorithm, row.seed)


class ActorCpu:
    """CPU seconds (user + system) of a run's env runner and learner actors, read from their processes.

    The actors' process ids are asked once (``foreach_env_runner``/``foreach_learner``) and again
    at each :meth:`delta` (a restarted runner is a new process, counted from its start); processes
    of this driver are left out (their CPU is the driver's). An algorithm without remote actors
    (or one the ids cannot be asked of) adds 0.
    """

    def __init__(self, algo: Any) -> None:
        self.algo = algo
        self.last: dict[int, float] = {}
        self.started = False  # the first call sets the baselines; a process seen later counts from its start
        self.delta()

    def pids(self) -> set[int]:
        """Process ids of the algorithm's remote env runners and learners."""
        pids: set[int] = set()
        runners = getattr(self.algo, "env_runner_group", None)
        learners = getattr(self.algo, "learner_group", None)
        try:
            if runners is not None and runners.num_remote_env_runners() > 0:
                pids.update(runners.foreach_env_runner(_pid, local_env_runner=False))
        except Exception as e:  # a runner that died between calls: counted from its successor on
            logger.debug("no env runner pids: %s", e)
        try:
            if learners is not None and learners.is_remote:
                results = learners.foreach_learner(_pid)
                pids.update(r.get() for r in results.ignore_errors())
        except Exception as e:
            logger.debug("no learner pids: %s", e)
        pids.discard(os.getpid())
        return {p for p in pids if isinstance(p, int)}

    def delta(self) -> float:
        """CPU seconds the actors used since the last call."""
        import psutil  # type: ignore[import-untyped]  # Ray's dependency; no stubs installed (pyproject lists none)

        total = 0.0
        for pid in self.pids():
            try:
                times = psutil.Process(pid).cpu_times()
            except (psutil.Error, OSError):
                continue
            now = times.user + times.system
            total += now - self.last.get(pid, 0.0 if self.started else now)
            self.last[pid] = now
        self.started = True
        return max(total, 0.0)


def _pid(*_: Any, **__: Any) -> int:
    return os.getpid()


class RunPaused(Exception):
    """A run stopped at ``--stop-after-s``; its checkpoint and curve so far are in ``partial_dir``."""


def partial_dir(args, race: str, label: str, seed: int, point: int | None = None) -> str:
    """Where a paused run keeps its checkpoint and curve: ``<results>/<benchmark>/<race>.partial/<label>/seed<k>``
    (a tuning run of grid point ``i``: ``.../<label>/tune<i>/seed<k>``)."""
    safe = "".join(c if c.isalnum() or c in "+-_." else "_" for c in label)
    parts = [safe] if point is None else [safe, f"tune{point}"]
    return os.path.join(args.results_dir, args.benchmark, f"{race}.partial", *parts, f"seed{seed}")


def run_one(
    entry: Entry, seed: int, args, race: str, log=logger.info, deadline: float | None = None, where: str | None = None
) -> RunRow:
    """Trains one algorithm with one seed to the budget, evaluating on the way; returns its row.

    With a ``deadline`` (``time.perf_counter()`` value, from ``--stop-after-s``) the run pauses at
    the first iteration boundary past it: it saves the algorithm's checkpoint and its curve so far
    under :func:`partial_dir` and raises :class:`RunPaused`; the next invocation with ``--resume``
    restores both and goes on (``extra["chunks"]`` counts the invocations a run spanned). ``where``
    is the paused run's folder (default :func:`partial_dir` of the entry and seed).
    """
    where = where or partial_dir(args, race, entry.label, seed)
    state_path = os.path.join(where, "state.json")
    resumed = os.path.exists(state_path)
    t0 = time.perf_counter()
    if resumed:
        with open(state_path) as f:
            state = json.load(f)
        started = (state["settings"], state["protocol"], state["machine"])
        if not same_json(started, (entry.settings, protocol_of(args), dataclasses.asdict(Machine.this()))):
            raise RaceError(
                f"--resume: {where} was started with other settings, protocol or machine; delete it to start over"
            )
        if state.get("step_count") != EVERY_SIMULATED_STEP:
            raise RaceError(
                f"--resume: {where} was started before 2026-11-27, when env steps were counted the old way; its "
                "curve would mix two counts: delete it to start over"
            )
        algo = entry.algo_cls.from_checkpoint(os.path.join(where, "checkpoint"))
    else:
        config = entry.config.copy(copy_frozen=False)
        config.debugging(seed=seed)
        algo = config.build_algo()
        state = {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "settings": entry.settings,
            "protocol": protocol_of(args),
            "machine": dataclasses.asdict(Machine.this()),
            "steps": 0,
            "wall": 0.0,
            "cpu": 0.0,
            "iterations": 0,
            "build_s": 0.0,
            "chunks": 0,
            "next_eval": None,
            "curve": {"env_steps": [], "wall_s": [], "eval_return": [], "cpu_s": []},
            "episode_returns": [],
            "train_returns": [],
            "recorded": {key: [] for key in args.record},
            "step_count": EVERY_SIMULATED_STEP,
            "breakdown": None,  # {name: [...]} from the first point
            # The black-box family counts its updates (runs of one budget differ in how many they compute).
            "updates": [] if isinstance(getattr(algo, "update_index", None), int) else None,
        }
    state["build_s"] = round(state["build_s"] + time.perf_counter() - t0, 2)
    state["chunks"] += 1
    curve, recorded, updates = state["curve"], state["recorded"], state["updates"]
    curve.setdefault("cpu_s", None)  # a run paused before CPU time was recorded: none along its curve
    state.setdefault("cpu", 0.0)
    actors = ActorCpu(algo)

    def evaluate(result):
        """One curve point; ``result`` is the latest ``train()`` result ({} before training)."""
        state["cpu"] += actors.delta()
        steps, wall = state["steps"], state["wall"]
        rets = entry.evaluate(algo, args.eval_episodes)
        curve["env_steps"].append(steps)
        curve["wall_s"].append(round(wall, 3))
        if curve["cpu_s"] is not None:
            curve["cpu_s"].append(round(state["cpu"], 3))
        curve["eval_return"].append(float(sum(rets) / len(rets)))
        state["episode_returns"].append(rets)
        train_return = metric_of(result, "env_runners/episode_return_mean")  # None until an episode ends
        state["train_returns"].append(train_return)
        for key, values in recorded.items():
            values.append(metric_of(result, key))
        breakdown = breakdown_of(result)
        if state["breakdown"] is None:
            state["breakdown"] = {key: [] for key in breakdown}
        for key, value in breakdown.items():
            state["breakdown"][key].append(value)
        if updates is not None:
            updates.append(int(algo.update_index))
        ret = curve["eval_return"][-1]
        log(f"  {entry.label} seed {seed}: {steps:>8d} env steps {wall:7.1f} s  eval return {ret:8.2f}")

    def pause():
        state["cpu"] += actors.delta()
        os.makedirs(where, exist_ok=True)
        algo.save_to_path(os.path.join(where, "checkpoint"))
        tmp = state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, state_path)  # the curve and the checkpoint it belongs to, or the older pair
        log(f"  {entry.label} seed {seed}: paused at {state['steps']} env steps ({where}); go on with --resume")

    try:
        if state["next_eval"] is None:
            evaluate({})
            state["next_eval"] = args.eval_every_env_steps
        while True:
            t, c = time.perf_counter(), time.process_time()
            result = algo.train()
            state["wall"] += time.perf_counter() - t
            state["cpu"] += time.process_time() - c
            state["iterations"] += 1
            state["steps"] = steps = env_steps_of(result)
            done = (args.budget_env_steps is not None and steps >= args.budget_env_steps) or (
                args.budget_s is not None and state["wall"] >= args.budget_s
            )
            if steps >= state["next_eval"] or done:
                evaluate(result)
                state["next_eval"] = (steps // args.eval_every_env_steps + 1) * args.eval_every_env_steps
            if done:
                break
            if deadline is not None and time.perf_counter() >= deadline:
                pause()
                raise RunPaused(where)
    finally:
        algo.stop()
        try:  # the empty log dir a Trainable built outside Tune leaves in ~/ray_results
            os.rmdir(algo.logdir)
        except OSError:
            pass
    return RunRow(
        benchmark=args.benchmark,
        race=race,
        algorithm=entry.label,
        env=args.env,
        seed=seed,
        settings=entry.settings,
        shared_keys=sorted((set(args.common) | set(EXECUTION_KEYS) | {"threads"}) - set(args.variable)),
        variable=sorted(args.variable),
        protocol=protocol_of(args),
        machine=Machine.this(),
        date=state["date"],
        curve=Curve(**curve),
        target=args.target,
        step_count=EVERY_SIMULATED_STEP,
        env_steps_breakdown=state["breakdown"],
        extra={
            "eval_episode_returns": state["episode_returns"],
            "train_return_mean": state["train_returns"],
            "recorded": recorded,
            **({} if updates is None else {"updates": updates}),
            "iterations": state["iterations"],
            "build_s": state["build_s"],
            **({"chunks": state["chunks"]} if state["chunks"] > 1 else {}),
            "command": args.command_line,
        },
    )


@dataclasses.dataclass
class RaceSpec:
    """What a race is and how this invocation runs it (``rllib race``'s options, checked by :func:`race_spec`).

    Attributes:
        algos: ``{label: registered name}`` in order (:func:`parse_algos`).
        env: A gymnasium env id (or a name registered with Tune).
        eval_every_env_steps: Env steps between evaluation points.
        seeds: The evaluation seeds; runs interleave (for each seed, every entry in turn).
        budget_env_steps: Stop a run at this many env steps sampled (every simulated step).
        budget_s: Stop a run after this many seconds in ``train()``.
        eval_episodes: Episodes (deterministic actions) per evaluation point.
        common: Config applied to every entry (network, runners, ...).
        variable: Settings the race varies on purpose.
        record: ``train()`` metrics kept at each evaluation point ('/'-separated paths).
        target: A return counted as solved (time and env steps to it are reported).
        benchmark: The folder under ``results_dir``.
        race: The race id and file name (None: the UTC date and time).
        results_dir: Where the rows go.
        num_cpus: CPUs of a local Ray the caller starts (None: all cores).
        threads: torch/OMP threads (driver, workers, ``torch_num_threads``).
        append: Add runs to an existing race (on equal terms).
        resume: Go on with a race: skip runs that have a row, resume a paused one.
        other_machine: Let ``append``/``resume`` join rows of another machine.
        stop_after_s: Stop this invocation after this many seconds (a run in progress pauses).
        dry_run: Check everything, run nothing.
        command_line: The race's own command, recorded in each row (:func:`race_argv`).
        tune: ``LABEL:KEY=[v1,...]`` items, each entry's tuning grid (:func:`rllib_ext.compare.tuning.parse_grids`).
        tune_seeds: The tuning seeds (None: the default, disjoint from ``seeds``; set by :func:`race_spec`).
        allow_unequal_tuning: Accept grids of unequal size (the rows name the entries not equally tuned).
        matched: ``TARGET:SOURCE`` items: the target's settings mapped from the source's
            (:mod:`rllib_ext.compare.matched`).
        grids: ``tune`` parsed, ``{label: {key: values}}`` (set by :func:`race_spec`).
        matched_pairs: ``matched`` parsed, ``{target label: source label}`` (set by :func:`race_spec`).
    """

    algos: dict[str, str]
    env: str
    eval_every_env_steps: int = DEFAULT_EVAL_EVERY_ENV_STEPS
    seeds: list[int] = dataclasses.field(default_factory=lambda: [0, 1, 2, 3, 4])
    budget_env_steps: int | None = None
    budget_s: float | None = None
    eval_episodes: int = 5
    common: dict[str, Any] = dataclasses.field(default_factory=dict)
    variable: list[str] = dataclasses.field(default_factory=list)
    record: list[str] = dataclasses.field(default_factory=list)
    target: float | None = None
    benchmark: str = "race"
    race: str | None = None
    results_dir: str = RESULTS_DIR
    num_cpus: int | None = None
    threads: int = 1
    append: bool = False
    resume: bool = False
    other_machine: bool = False
    stop_after_s: float | None = None
    dry_run: bool = False
    command_line: str = ""
    tune: list[str] = dataclasses.field(default_factory=list)
    tune_seeds: list[int] | None = None
    allow_unequal_tuning: bool = False
    matched: list[str] = dataclasses.field(default_factory=list)
    grids: dict[str, dict[str, list[Any]]] = dataclasses.field(default_factory=dict)
    matched_pairs: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def rule(self) -> str:
        """The race's tuning rule: grid, matched or none."""
        return tuning_lib.GRID if self.grids else tuning_lib.MATCHED if self.matched_pairs else tuning_lib.NONE


def race_spec(
    *, algos: Sequence[str], common: str = "{}", sets: Sequence[str] = (), **options: Any
) -> tuple[RaceSpec, dict[str, dict[str, Any]]]:
    """Checks a race's options and returns them as a :class:`RaceSpec` and each entry's own settings.

    Args:
        algos: ``[LABEL=]NAME`` items (:func:`parse_algos`).
        common: The shared config as a JSON object.
        sets: ``LABEL:KEY=JSON`` items, an entry's own settings (:func:`parse_own_settings`).
        **options: The other fields of :class:`RaceSpec`.

    Returns:
        ``(spec, own)``, ``own`` as ``{label: {key: value}}``.

    Raises:
        RaceError: Naming the option at fault (no budget, a value <= 0, a repeated seed, flags that
            exclude each other, bad JSON, a bad label).
    """
    spec = RaceSpec(algos={}, **options)
    if spec.budget_env_steps is None and spec.budget_s is None:
        raise RaceError("give --budget-env-steps and/or --budget-s")
    if spec.append and spec.resume:
        raise RaceError("--append and --resume exclude each other (--resume also adds new runs)")
    if spec.other_machine and not (spec.append or spec.resume):
        raise RaceError("--other-machine goes with --append or --resume (it lets them join another machine's rows)")
    if spec.other_machine and spec.budget_s is not None:
        raise RaceError(
            "--other-machine needs an env-step budget alone: with --budget-s a run's work depends on the machine"
        )
    for flag in ("budget_env_steps", "budget_s", "eval_every_env_steps", "eval_episodes", "threads", "stop_after_s"):
        value = getattr(spec, flag)
        if value is not None and value <= 0:
            raise RaceError(f"--{flag.replace('_', '-')} must be > 0, got {value}")
    for flag in ("seeds", "record"):
        if len(set(getattr(spec, flag))) != len(getattr(spec, flag)):
            raise RaceError(f"--{flag} must not repeat")
    spec.algos = parse_algos(algos)
    try:
        spec.common = json.loads(common)
    except json.JSONDecodeError as e:
        raise RaceError(f"--common is not JSON ({e.msg})") from None
    if not isinstance(spec.common, dict):
        raise RaceError("--common must be a JSON object")
    own = parse_own_settings(sets, list(spec.algos))
    check_tuning_options(spec)
    return spec, own


def check_tuning_options(spec: RaceSpec) -> None:
    """Parses and checks ``--tune``, ``--tune-seeds``, ``--allow-unequal-tuning`` and ``--matched`` into
    ``spec.grids``, ``spec.tune_seeds`` and ``spec.matched_pairs``.

    Raises:
        RaceError: Naming the option at fault (see :mod:`rllib_ext.compare.tuning`).
    """
    labels = list(spec.algos)
    if spec.tune and spec.matched:
        raise RaceError("--tune and --matched exclude each other: a race has one tuning rule (grid, matched or none)")
    if not spec.tune and (spec.tune_seeds is not None or spec.allow_unequal_tuning):
        raise RaceError("--tune-seeds and --allow-unequal-tuning go with --tune")
    if spec.tune and spec.append:
        raise RaceError("--append does not add to a tuned race (its entries' points come from its tuning rows)")
    try:
        spec.grids = tuning_lib.parse_grids(spec.tune, labels)
        if spec.grids:
            spec.tune_seeds = tuning_lib.tuning_seeds(spec.seeds, spec.tune_seeds)
            tuning_lib.check_equal_size(tuning_lib.grid_sizes(spec.grids, labels), spec.allow_unequal_tuning)
    except tuning_lib.TuningError as e:
        raise RaceError(str(e)) from None
    for item in spec.matched:
        target, sep, source = item.partition(":")
        if not sep or target not in spec.algos or source not in spec.algos or target == source:
            raise RaceError(
                f"--matched takes TARGET:SOURCE, two different entries of --algos ({', '.join(labels)}), got {item!r}"
            )
        if target in spec.matched_pairs or target in spec.matched_pairs.values() or source in spec.matched_pairs:
            raise RaceError(f"--matched {item}: an entry is matched once, and a target is no other's source")
        spec.matched_pairs[target] = source


def command_line(prog: str, argv: Sequence[str]) -> str:
    """The command recorded in each row: ``prog`` and ``argv`` less the invocation flags (:func:`race_argv`)."""
    return f"{prog} " + " ".join(_quote(a) for a in race_argv(argv))


#: Flags of how one invocation ran, not of the race: left out of the recorded command. Where this
#: machine kept the rows (they are copied to where the command without it writes) and how a long
#: race was split into chunks (the command without them runs it whole).
_INVOCATION_FLAGS = {"--results-dir": 1, "--stop-after-s": 1, "--resume": 0, "--dry-run": 0, "--other-machine": 0}


def race_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` less the :data:`_INVOCATION_FLAGS` (and their values): the race's own command."""
    out, skip = [], 0
    for a in argv:
        if skip:
            skip -= 1
        elif a in _INVOCATION_FLAGS:
            skip = _INVOCATION_FLAGS[a]
        elif not any(a.startswith(f + "=") for f in _INVOCATION_FLAGS):
            out.append(a)
    return out


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def _remove_paused(root: str, where: str) -> None:
    """Deletes a finished run's paused state, and the race's ``.partial`` folder once it is empty."""
    import shutil

    shutil.rmtree(where, ignore_errors=True)
    folder, root = os.path.dirname(os.path.abspath(where)), os.path.abspath(root)
    while folder.startswith(root):  # the emptied folders up to the root (a tuning run's is one deeper)
        try:
            os.rmdir(folder)
        except OSError:
            return
        folder = os.path.dirname(folder)


@dataclasses.dataclass
class Prepared:
    """A race checked and planned (:func:`prepare`), ready to :func:`run`.

    Attributes:
        spec: The race's options.
        entries: Each entry's class, validated config and settings, in ``spec.algos`` order.
        race: The race id.
        out: The rows file, ``<results_dir>/<benchmark>/<race>.jsonl``.
        done: The runs that already have a row (``append``/``resume``; :func:`run_key`).
        tuning: The tuning stage (grid points, matched settings, or none).
    """

    spec: RaceSpec
    entries: list[Entry]
    race: str
    out: str
    done: set[tuple]
    tuning: TuningPlan = dataclasses.field(default_factory=lambda: TuningPlan())

    @property
    def paused_root(self) -> str:
        """Where paused runs keep their checkpoints: ``<results_dir>/<benchmark>/<race>.partial``."""
        return os.path.join(self.spec.results_dir, self.spec.benchmark, f"{self.race}.partial")

    def plan_lines(self) -> list[str]:
        """The plan in words: each entry's own settings, then the shared and execution settings."""
        spec = self.spec
        # An execution setting the race varies on purpose (--variable) is shown as the entry's own.
        not_own = {*spec.common, *(set(EXECUTION_KEYS) - set(spec.variable)), "threads", "registered_algorithm"}
        lines = []
        for e in self.entries:
            own_text = ", ".join(f"{k}: {e.settings[k]!r}" for k in sorted(set(e.settings) - not_own))
            lines.append(f"{e.label} ({e.registered}): own settings {{{own_text}}}")
        execution = {k: self.entries[0].settings[k] for k in EXECUTION_KEYS}
        lines.append(f"shared settings {json.dumps(spec.common, sort_keys=True)}; execution {json.dumps(execution)}")
        return lines + self.tuning.plan_lines()


def prepare(spec: RaceSpec, own: dict[str, dict[str, Any]]) -> Prepared:
    """Every check of a race that needs no Ray: the rows file, paused runs, each entry's config, like
    with like (:func:`plan`), and an existing race's terms (:func:`check_append`).

    Raises:
        RaceError: Naming what is wrong.
    """
    race = spec.race or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H%M%SZ")
    out = os.path.join(spec.results_dir, spec.benchmark, f"{race}.jsonl")
    prepared = Prepared(spec, [], race, out, set())
    if os.path.exists(out) and not (spec.append or spec.resume):
        raise RaceError(f"{out} exists: give another --race (or --append to add runs to it, --resume to go on)")
    if spec.append and not os.path.exists(out):
        raise RaceError(f"--append: {out} does not exist")
    if os.path.exists(prepared.paused_root) and not spec.resume:
        raise RaceError(f"{prepared.paused_root} holds paused runs: go on with --resume (or delete it)")
    prepared.entries, prepared.tuning = plan_tuning(spec, own, plan(spec, own))
    if os.path.exists(out) and (spec.append or spec.resume):
        prepared.done = check_append(out, prepared.entries, spec, resume=spec.resume, tuning=prepared.tuning)
    return prepared


@dataclasses.dataclass
class TuningPlan:
    """How a race sets its entries' own settings before the evaluation runs (``rllib race --tune/--matched``).

    Attributes:
        rule: :data:`rllib_ext.compare.tuning.GRID`, ``MATCHED`` or ``NONE``.
        grids: ``{label: {key: values}}`` of the tuned entries.
        seeds: The tuning seeds (grid).
        sizes: Each entry's number of grid points (1: not tuned).
        not_equal: The entries with fewer points than the largest grid.
        points: ``{label: [Entry per grid point]}`` (an untuned entry: its one entry).
        matched: ``{target label: {"source", "paper", "values"}}``: the mapped settings.
    """

    rule: str = tuning_lib.NONE
    grids: dict[str, dict[str, list[Any]]] = dataclasses.field(default_factory=dict)
    seeds: list[int] = dataclasses.field(default_factory=list)
    sizes: dict[str, int] = dataclasses.field(default_factory=dict)
    not_equal: list[str] = dataclasses.field(default_factory=list)
    points: dict[str, list[Entry]] = dataclasses.field(default_factory=dict)
    matched: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def record(
        self, label: str, *, point: int | None = None, chosen: int | None = None, scores: list | None = None
    ) -> dict[str, Any]:
        """The row's ``tuning``: the rule and, for a grid, the entry's grid, the tuning seeds, every
        entry's grid size and the choice rule, with the run's ``point`` (a tuning row) or the
        ``chosen`` point and each point's ``scores`` [IQM, worst seed] (an evaluation row)."""
        record: dict[str, Any] = {"rule": self.rule}
        if self.rule == tuning_lib.MATCHED:
            record["pairs"] = {t: m["source"] for t, m in self.matched.items()}
            if label in self.matched:
                record.update(self.matched[label])
        if self.rule != tuning_lib.GRID:
            return record
        entry_points = [p for p in tuning_lib.grid_points(self.grids.get(label, {}))]
        record.update(
            grid=self.grids.get(label, {}),
            seeds=self.seeds,
            grid_sizes=self.sizes,
            not_equally_tuned=self.not_equal,
            choice=tuning_lib.CHOICE_RULE,
        )
        if point is not None:
            record.update(point=entry_points[point], point_index=point)
        if chosen is not None:
            record.update(chosen=entry_points[chosen], chosen_index=chosen, scores=scores)
        return record

    def plan_lines(self) -> list[str]:
        """The tuning stage in words (the plan ``rllib race`` prints)."""
        if self.rule == tuning_lib.NONE:
            return ["tuning: none (each entry runs with its own defaults and the settings given)"]
        if self.rule == tuning_lib.MATCHED:
            return [
                f"tuning: matched: {t} <- {m['source']} ({m['paper']}): {json.dumps(m['values'], sort_keys=True)}"
                for t, m in self.matched.items()
            ]
        lines = [f"tuning: grid on seeds {self.seeds}, then the best point ({tuning_lib.CHOICE_RULE})"]
        for label, k in self.sizes.items():
            grid = self.grids.get(label)
            lines.append(f"tuning: {label}: " + (f"grid of {k}: {json.dumps(grid)}" if grid else "not tuned"))
        if self.not_equal:
            lines.append(f"tuning: NOT equally tuned: {', '.join(self.not_equal)} (--allow-unequal-tuning)")
        return lines


def plan_tuning(spec: RaceSpec, own: dict[str, dict[str, Any]], entries: list[Entry]) -> tuple[list[Entry], TuningPlan]:
    """The race's tuning stage, planned before Ray starts: each grid point's entry (built and
    checked like the entry itself), or the matched targets' settings (the entries rebuilt with them).

    Returns:
        ``(entries, plan)``: the entries (the matched targets with their mapped settings) and the plan.

    Raises:
        RaceError: A tuned key that is an execution or ``--common`` setting or also in ``--set``, a
            grid point the algorithm rejects, a mapping with no rule or in conflict with ``--common``/``--set``.
    """
    rule = spec.rule
    if rule == tuning_lib.NONE:
        return entries, TuningPlan()
    by_label = {e.label: e for e in entries}
    if rule == tuning_lib.MATCHED:
        matched: dict[str, dict[str, Any]] = {}
        own = {label: dict(values) for label, values in own.items()}
        for target, source in spec.matched_pairs.items():
            item = f"--matched {target}:{source}"
            try:
                values, paper = matched_settings(
                    by_label[target].registered, by_label[source].registered, by_label[source].config
                )
            except MatchError as e:
                raise RaceError(f"{item}: {e}") from None
            mapped = {}
            for key, value in values.items():
                value = _jsonable(value)
                if key in spec.common and key not in spec.variable:
                    if not same_json(spec.common[key], value):
                        raise RaceError(
                            f"{item} maps {key} to {value!r} in {target}'s units, but --common gives every entry "
                            f"{key}={spec.common[key]!r}: take {key} out of --common"
                        )
                    continue
                if key in own[target] and not same_json(own[target][key], value):
                    raise RaceError(f"--set {target}:{key} conflicts with {item} (which maps it to {value!r})")
                mapped[key] = value
            own[target].update(mapped)
            matched[target] = {"source": source, "paper": paper, "values": mapped}
        return plan(spec, own), TuningPlan(rule=rule, matched=matched)
    labels = list(spec.algos)
    points: dict[str, list[Entry]] = {}
    for label in labels:
        grid = spec.grids.get(label)
        if not grid:
            points[label] = [by_label[label]]
            continue
        for key in grid:
            if key in EXECUTION_KEYS:
                raise RaceError(f"--tune {label}:{key}: execution settings are held equal across the race")
            if key in spec.common and key not in spec.variable:
                raise RaceError(f"--tune {label}:{key} overrides a --common setting (every entry gets its value)")
            if key in own[label]:
                raise RaceError(f"--tune {label}:{key} and --set {label}:{key} both set it")
        sub = dataclasses.replace(spec, algos={label: spec.algos[label]})
        points[label] = [plan(sub, {label: {**own[label], **point}})[0] for point in tuning_lib.grid_points(grid)]
        for point_entry in points[label]:
            for key in set(EXECUTION_KEYS) - set(spec.variable):
                if not same_json(point_entry.settings[key], by_label[label].settings[key]):
                    raise RaceError(f"--tune {label}: a grid point changes the execution setting {key}")
    sizes = tuning_lib.grid_sizes(spec.grids, labels)
    plan_ = TuningPlan(
        rule=rule,
        grids=spec.grids,
        seeds=list(spec.tune_seeds or []),
        sizes=sizes,
        not_equal=tuning_lib.not_equally_tuned(sizes),
        points=points,
    )
    return entries, plan_


def chosen_points(prepared: Prepared) -> dict[str, tuple[int, list[tuple[float, float]] | None]]:
    """Each entry's chosen grid point and every point's score, from the race's tuning rows
    (:func:`rllib_ext.compare.tuning.choose_best`); an untuned entry: point 0, no scores.

    Raises:
        RaceError: A tuning run without its row (the tuning stage is not complete).
    """
    from rllib_ext.compare.rows import read_rows

    finals: dict[tuple[str, int], list[float]] = {}
    for row in read_rows(prepared.out) if os.path.exists(prepared.out) else []:
        if row.stage == TUNING:
            index = int((row.tuning or {}).get("point_index", -1))
            finals.setdefault((row.algorithm, index), []).append(row.final_return)
    tuning = prepared.tuning
    out: dict[str, tuple[int, list[tuple[float, float]] | None]] = {}
    for label, entries in tuning.points.items():
        if label not in tuning.grids:
            out[label] = (0, None)
            continue
        by_point = [finals.get((label, i), []) for i in range(len(entries))]
        if any(len(f) != len(tuning.seeds) for f in by_point):
            raise RaceError(f"{label}: the tuning stage has not run every grid point on every tuning seed")
        out[label] = (tuning_lib.choose_best(by_point), [tuning_lib.score(f) for f in by_point])
    return out


def set_threads(threads: int) -> None:
    """torch's threads in this process and ``OMP_NUM_THREADS`` of the workers: call it before
    ``ray.init``, whose workers inherit the variable."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)


def run(prepared: Prepared, log: Callable[[str], None] = logger.info) -> str:
    """Runs a prepared race's missing runs, interleaved, appending each finished run's row.

    Ray must be running (a caller's ``ray.init``, after :func:`set_threads`); torch's threads are
    set to ``spec.threads``.

    Args:
        prepared: From :func:`prepare`.
        log: Gets one line per evaluation point and per run.

    Returns:
        The rows file.

    Raises:
        RaceError: When an entry needs more CPUs than Ray has, or a paused run cannot be resumed.
        RunPaused: When ``spec.stop_after_s`` passed before the race was complete.
    """
    spec, entries = prepared.spec, prepared.entries
    deadline = None if spec.stop_after_s is None else time.perf_counter() + spec.stop_after_s
    set_threads(spec.threads)
    logging.getLogger("ray.rllib.algorithms.algorithm_config").setLevel(logging.ERROR)
    check_resources(entries)
    tuning = prepared.tuning
    ran = False  # an invocation always trains (at least one iteration of) one run: progress

    def one(entry: Entry, seed: int, key: tuple, where: str, record: dict[str, Any], stage: str) -> None:
        nonlocal ran
        if key in prepared.done:
            return
        if ran and deadline is not None and time.perf_counter() >= deadline:
            raise RunPaused(prepared.out)  # no new run past the deadline
        ran = True
        row = run_one(entry, seed, spec, prepared.race, log=log, deadline=deadline, where=where)
        append_row(prepared.out, dataclasses.replace(row, stage=stage, tuning=record))
        _remove_paused(prepared.paused_root, where)

    chosen: dict[str, tuple[int, Any]] = {}
    if tuning.rule == tuning_lib.GRID:
        tuned = {label: points for label, points in tuning.points.items() if label in tuning.grids}
        runs = sum(len(p) for p in tuned.values()) * len(tuning.seeds)
        log(f"tuning: {runs} runs on seeds {tuning.seeds} ({', '.join(f'{k}: {len(p)}' for k, p in tuned.items())})")
        for seed in tuning.seeds:
            for label, points in tuned.items():
                for i, entry in enumerate(points):
                    where = partial_dir(spec, prepared.race, label, seed, point=i)
                    one(entry, seed, (label, seed, i), where, tuning.record(label, point=i), TUNING)
        chosen = chosen_points(prepared)
        for label, (i, _) in chosen.items():
            if label in tuning.grids:
                log(f"tuning: {label}: best point {json.dumps(tuning_lib.grid_points(tuning.grids[label])[i])}")
    log(f"{len(spec.seeds)} seeds x {len(entries)} algorithms -> {prepared.out}")
    for seed in spec.seeds:
        for entry in entries:
            i, scores = chosen.get(entry.label, (0, None))
            if entry.label in tuning.grids:
                record = tuning.record(entry.label, chosen=i, scores=scores)
                entry = tuning.points[entry.label][i]
            else:
                record = tuning.record(entry.label)
            where = partial_dir(spec, prepared.race, entry.label, seed)
            one(entry, seed, (entry.label, seed), where, record, EVALUATION)
    return prepared.out
