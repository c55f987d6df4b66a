"""CEMRL_EXT's generation schedule without Ray (paper 001's CEM-RL baseline, apourchot/CEM-RL and
aes-rl's P-CEM-RL): which critic calls and which jobs a generation makes, in which order.

The driver is a ``CEMRL`` without RLlib's setup: the critic worker is a recorder, ``_run`` returns
scripted results (each individual runs ``LENGTH`` env steps), and the logging/publishing hooks do
nothing. What is checked is the schedule of ``training_step`` itself:

- no RL individual (and no critic call) in the first generation (no previous generation yet);
- then the first ``rl_population`` individuals are RL individuals: each is preceded by a critic call
  of (previous generation's steps // rl_population) steps with *that individual* as the target actor,
  and trains for the previous generation's steps (``rl_actor_steps`` "auto");
- serial mode interleaves critic call i and job i; parallel mode (P-CEM-RL) makes every critic call
  first, then submits all jobs at once.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from rllib_ext.algorithms.cemrl import cemrl as cemrl_module
from rllib_ext.algorithms.cemrl.cemrl import CEMRL, CEMRLConfig
from rllib_ext.common.erl.protocol import ERLResult
from rllib_ext.common.steps import StepAccount

LENGTH = 200  # env steps of every scripted individual
DIM = 7  # parameters of the scripted μ


class RecordingCritic:
    """Stands in for the critic worker actor: ``train.remote(steps, actor)`` is recorded."""

    def __init__(self, events):
        self.events = events
        self.train = types.SimpleNamespace(remote=self._train)

    def _train(self, steps, actor):
        self.events.append(("critic", int(steps), np.asarray(actor).copy()))
        return ("critic-call", len(self.events))


def make_driver(monkeypatch, mode: str, population_size=4, rl_population=2, initial_steps=400):
    monkeypatch.setattr(cemrl_module, "ray", types.SimpleNamespace(put=lambda value: ("ref", value)))
    cfg = (
        CEMRLConfig()
        .environment("Pendulum-v1")
        .training(
            mode=mode,
            population_size=population_size,
            rl_population=rl_population,
            initial_steps=initial_steps,
            policy_hiddens=[4],
            critic_hiddens=[4],
        )
    )
    cfg.validate()
    algo = object.__new__(CEMRL)
    algo.config = cfg
    algo.events = []
    algo.critic = RecordingCritic(algo.events)
    algo.critic_ref = ("ref", "critic weights")
    algo.critic_result = lambda ref: None
    ids = iter(range(10**6))
    algo.pool = types.SimpleNamespace(new_job_id=lambda: next(ids), snapshot=lambda: (0.0, {}))
    algo.metrics = MetricsLogger()
    algo.mu = np.zeros(DIM, dtype=np.float32)
    algo.var = np.full(DIM, cfg.sigma_init, dtype=np.float32)
    algo.cem = cfg.make_population(algo.mu)
    algo.prev_generation_steps = 0
    algo.update_index, algo.batch_seed = 0, 0
    algo.counters = {"individual_steps": 0, "n_rl": 0, "n_es": 0, "individuals_failed": 0, "individual_retries": 0}
    algo.steps = StepAccount()
    for hook in ("check_can_train", "publish", "log_batch", "log_common", "sync_mu_to_learner"):
        setattr(algo, hook, lambda *a, **k: None)

    def run(jobs):
        algo.events.append(("run", [(np.asarray(j.params_ref[0][1]).copy(), j.rl_steps, j.critic_ref) for j in jobs]))
        return {
            j.id: ERLResult(job=j, ret=float(k), length=LENGTH, rl=bool(j.rl_steps), params=None)
            for k, j in enumerate(jobs)
        }

    algo._run = run
    return algo


def generation(algo):
    """One training_step; returns its events and the individuals it asked sep-CEM for."""
    start = len(algo.events)
    asked = []
    ask = algo.cem.ask

    def recording_ask(seed):
        asked.append(ask(seed))
        return asked[-1]

    algo.cem.ask = recording_ask
    try:
        algo.training_step()
    finally:
        algo.cem.ask = ask
    return algo.events[start:], asked[0]


@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_first_generation_has_no_rl_individual_and_no_critic_call(monkeypatch, mode):
    algo = make_driver(monkeypatch, mode)
    events, _ = generation(algo)
    assert all(kind == "run" for kind, *_ in events)
    jobs = [job for _, batch in events for job in batch]
    assert len(jobs) == 4 and all(rl_steps == 0 and critic is None for _, rl_steps, critic in jobs)
    assert algo.prev_generation_steps == 4 * LENGTH


@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_rl_individuals_get_the_critic_steps_and_actor_steps_of_the_reference(monkeypatch, mode):
    algo = make_driver(monkeypatch, mode)
    generation(algo)  # 800 env steps: past initial_steps (400), and a previous generation exists
    prev = algo.prev_generation_steps
    events, individuals = generation(algo)
    critic_calls = [e for e in events if e[0] == "critic"]
    jobs = [job for e in events if e[0] == "run" for job in e[1]]
    # One critic call per RL individual, prev // rl_population steps, that individual as the target actor.
    assert [steps for _, steps, _ in critic_calls] == [prev // 2, prev // 2]
    for (_, _, actor), z in zip(critic_calls, individuals[:2], strict=True):
        np.testing.assert_array_equal(actor, z)
    # The first rl_population individuals train for the previous generation's steps, the rest are ES.
    assert [rl_steps for _, rl_steps, _ in jobs] == [prev, prev, 0, 0]
    assert all(critic is not None for _, rl_steps, critic in jobs if rl_steps)
    for (z_job, _, _), z in zip(jobs, individuals, strict=True):
        np.testing.assert_array_equal(z_job, z)
    # The order: serial interleaves critic call i with job i; parallel calls the critic for every RL
    # individual first, then runs all the jobs at once (aes-rl's P-CEM-RL).
    kinds = [e[0] if e[0] == "critic" else f"run{len(e[1])}" for e in events]
    if mode == "serial":
        assert kinds == ["critic", "run1", "critic", "run1", "run1", "run1"]
    else:
        assert kinds == ["critic", "critic", "run4"]
    assert algo.counters["n_rl"] == 2 and algo.counters["n_es"] == 4 + 2


def test_no_rl_individual_before_rl_start_steps(monkeypatch):
    algo = make_driver(monkeypatch, "serial", initial_steps=2000)  # 800 env steps per generation
    for _ in range(2):
        events, _ = generation(algo)
        assert not [e for e in events if e[0] == "critic"]
    events, _ = generation(algo)  # 1600 < 2000: still none
    assert not [e for e in events if e[0] == "critic"]
    events, _ = generation(algo)  # 2400 ≥ 2000: RL individuals now
    assert len([e for e in events if e[0] == "critic"]) == 2
