"""AESRL_EXT's driver bookkeeping without Ray: warm-up individuals (paper 001 Alg. 1 vs the aes-rl
reference), the credit of a re-queued individual, and what RL individuals' training cost (the
ERL family's ``collect``).

The driver is an ``AESRL`` without RLlib's setup: the black-box pool runs over the scripted
EnvRunnerGroup of ``tests/unit/common/blackbox/test_pool.py`` (Ray stubbed), and a real
:class:`~rllib_ext.common.erl.ERLEnvRunner` in this process runs the calls that group received.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from rllib_ext.algorithms.aesrl.aesrl import AESRL, Finished, Pending
from rllib_ext.common import waits
from rllib_ext.common.blackbox import env_runner as blackbox_env_runner
from rllib_ext.common.blackbox import pool as async_pool
from rllib_ext.common.blackbox.pool import AsyncJobPool
from rllib_ext.common.blackbox.protocol import EvaluationJob, Reply, theta_digest
from rllib_ext.common.erl.algorithm import LIFETIME_COUNTERS
from rllib_ext.common.erl.env_runner import ERLEnvRunner
from rllib_ext.common.erl.population import gaussian_individual
from rllib_ext.common.erl.protocol import ERLResult
from rllib_ext.common.steps import StepAccount
from tests.builders import small_aesrl_config
from tests.unit.common.blackbox.test_pool import FakeGroup, FakeRayError, fake_get, fake_wait


@pytest.fixture
def fake_ray(monkeypatch):
    """ray.put/wait/get of the pool and the runner stubbed: an object ref is ("ref", value)."""
    fake = types.SimpleNamespace(
        put=lambda value: ("ref", value),
        wait=fake_wait,
        get=lambda ref, timeout=None: ref[1] if isinstance(ref, tuple) else fake_get(ref),
        exceptions=types.SimpleNamespace(RayError=FakeRayError, GetTimeoutError=TimeoutError),
    )
    monkeypatch.setattr(async_pool, "ray", fake)
    monkeypatch.setattr(blackbox_env_runner, "ray", fake)
    monkeypatch.setattr(waits, "ray", fake)  # the runner's bounded payload fetch


@pytest.fixture(scope="module")
def runner():
    """One ERLEnvRunner (Pendulum, a 16-16 actor) that runs every call the fake group receives."""
    r = ERLEnvRunner(config=small_aesrl_config(initial_steps=0))
    yield r
    r.stop()


def make_driver(runner, **training) -> AESRL:
    """An AESRL driver over runners 1 and 2 (one job each), μ_0 = the runner's actor, σ² = 1e-2."""
    cfg = small_aesrl_config(sigma_init=1e-2, **training)
    cfg.validate()
    runner.version = -1  # its cached payload belongs to another test's driver
    algo = object.__new__(AESRL)
    algo.config = cfg
    algo.pool = AsyncJobPool(FakeGroup([1, 2]), jobs_in_flight=1)
    algo.metrics = MetricsLogger()
    algo.env_runner_group, algo.replay, algo.critic_ref = None, None, None  # no local runner
    algo.update_index, algo.batch_seed = 0, 0
    algo.counters = {"individual_steps": 0, "n_rl": 0, "n_es": 0}
    algo.steps = StepAccount()
    algo.mu = runner.module.get_flat().copy()
    algo.var = np.full_like(algo.mu, cfg.sigma_init)
    algo.init_population()
    algo.publish()
    return algo


def run_call(group, index, runner, ret=None):
    """The call ``group.calls[index]`` runs on ``runner``; its reply becomes ready (with return ``ret``)."""
    _, call, ref = group.calls[index]
    ref.reply = runner.run_jobs(call)
    if ret is not None:
        ref.reply.results[0].ret = float(ret)
    return call


def handle(algo, replies):
    """What AESRL.training_step does with finished results (individuals and f(μ) evaluations)."""
    for reply in replies:
        for r in reply.results:
            (algo._on_mean if isinstance(r.job, EvaluationJob) else algo._on_individual)(r)


def test_warmup_individuals_update_the_population_and_cost_mu_evaluations_by_default(fake_ray, runner):
    """The reference (aes-rl algorithm/aesrl.py) tells warm-up individuals after 5 evaluations of μ."""
    algo = make_driver(runner, initial_steps=10_000, mean_eval_episodes=5)
    algo._submit_individual()
    algo.pool.pump()
    call = run_call(algo.pool.group, 0, runner, ret=0.0)  # f(z) = 0
    (job,) = call.jobs
    assert job.random_actions and not job.rl_steps
    handle(algo, algo.pool.poll(timeout_s=0))
    assert algo.counters["warmup_individuals"] == 1 and algo.counters["n_es"] == 0  # not in Eq. (3)'s counts
    algo.pool.pump()
    (_, mean_call, _) = algo.pool.group.calls[1]
    assert isinstance(mean_call.jobs[0], EvaluationJob) and mean_call.jobs[0].episodes == 5  # f(μ): 5 episodes
    mu0, var0 = algo.mu.copy(), algo.var.copy()
    run_call(algo.pool.group, 1, runner, ret=-100.0)  # f(μ) = -100
    handle(algo, algo.pool.poll(timeout_s=0))
    # Eq. (10) with f_b = 200, d = 100: p = (d + f_b)/(d + 2 f_b) = 0.6; Eq. (4) moves μ to the warm-up z.
    assert algo.update_index == 1 and algo._p_by_kind["es"] == [pytest.approx(0.6)]
    z = gaussian_individual(mu0, var0, job.seed)
    assert algo.mu == pytest.approx(0.4 * mu0 + 0.6 * z, abs=1e-6)
    assert algo.var == pytest.approx(np.maximum((z - mu0) * (z - algo.mu), 1e-5), abs=1e-7)  # Eq. (11), n = 1


def test_warmup_individuals_can_leave_the_population_alone(fake_ray, runner):
    """warmup_updates_population=False: steps and replay kept, no tell, no f(μ) episodes."""
    algo = make_driver(runner, initial_steps=10_000, warmup_updates_population=False)
    mu0, var0 = algo.mu.copy(), algo.var.copy()
    algo._submit_individual()
    algo.pool.pump()
    run_call(algo.pool.group, 0, runner)
    handle(algo, algo.pool.poll(timeout_s=0))
    assert algo.counters["warmup_individuals"] == 1 and algo.counters["individual_steps"] == 200
    algo.pool.pump()
    assert len(algo.pool.group.calls) == 1 and algo.pool.num_queued == 0  # no evaluation of μ was asked for
    assert algo.update_index == 0 and np.array_equal(algo.mu, mu0) and np.array_equal(algo.var, var0)


def test_an_individual_back_before_the_first_f_mu_waits_untold_then_is_told(fake_ray, runner):
    """mean_fitness="interpolate" (the class docstring's table): an individual back before μ's first
    evaluation waits in ``_untold`` (a Finished), and the evaluation's f(μ) tells it."""
    algo = make_driver(runner, initial_steps=0, mean_fitness="interpolate")
    group = algo.pool.group
    algo._submit_mean()  # f(μ_0), as setup() asks for it
    algo._submit_individual()
    (pending,) = algo._pending.values()
    assert isinstance(pending, Pending) and not pending.rl and not pending.warmup
    algo.pool.pump()
    (_, mean_call, _), (_, ind_call, _) = group.calls
    assert isinstance(mean_call.jobs[0], EvaluationJob) and algo._awaiting_mean == {mean_call.jobs[0].id: None}
    run_call(group, 1, runner, ret=5.0)  # the individual first
    handle(algo, algo.pool.poll(timeout_s=0))
    (untold,) = algo._untold
    assert isinstance(untold, Finished) and untold.fitness == 5.0 and untold.length == 200
    assert np.array_equal(untold.z, pending.z) and not algo._pending and algo.update_index == 0
    run_call(group, 0, runner, ret=1.0)  # then f(μ_0)
    handle(algo, algo.pool.poll(timeout_s=0))
    assert algo._untold == [] and algo._awaiting_mean == {} and algo.update_index == 1


def test_a_requeued_individual_is_credited_to_the_mu_it_was_built_from(fake_ray, runner):
    """Review B1 on AES-RL: individual A is sent with (μ_0, σ²_0); B and C finish and move μ; A's runner
    dies and A is re-sent to a runner that already holds μ_2. It must rebuild A from μ_0 — the z the
    driver tells — not from the newest μ (the bug: a re-sent call took the payload published last)."""
    algo = make_driver(runner, initial_steps=0, mean_rule="one_plus_one", mean_fitness="interpolate")
    algo.population.f_mu = -1e9  # (1+1)-ES, Eq. (5): a better individual becomes μ (p = 1)
    group = algo.pool.group
    algo._submit_individual()  # A, version 0
    algo._submit_individual()  # B, version 0
    algo.pool.pump()
    (rid_a, call_a, _), (rid_b, _, _) = group.calls
    job_a = call_a.jobs[0]
    z_a = algo._pending[job_a.id].z  # the z the driver will tell for A
    run_call(group, 1, runner, ret=0.0)  # B finishes: μ_1 = z_B
    handle(algo, algo.pool.poll(timeout_s=0))
    algo._submit_individual()  # C, version 1, on B's runner
    algo.pool.pump()
    run_call(group, 2, runner, ret=1.0)  # C finishes: μ_2 = z_C; that runner now holds version 1
    handle(algo, algo.pool.poll(timeout_s=0))
    assert algo.update_index == 2 and runner.version == 1
    mu2, var2 = algo.mu.copy(), algo.var.copy()
    group.healthy = [rid_b]  # A's runner dies with A in flight
    algo.pool.sync_health()  # RLlib's health, taken after its restore_env_runners
    algo.pool.pump()
    resent = [i for i, (rid, call, _) in enumerate(group.calls) if call.jobs[0].id == job_a.id and rid == rid_b]
    assert len(resent) == 1 and algo.pool.num_calls_lost == 1
    call = run_call(group, resent[0], runner, ret=2.0)
    assert call.version == 0 and runner.version == 0
    assert np.array_equal(runner._params, z_a)  # the runner evaluated z_A, built from μ_0, σ²_0 ...
    assert not np.allclose(gaussian_individual(mu2, var2, job_a.seed), z_a)  # ... not from the newest μ
    handle(algo, algo.pool.poll(timeout_s=0))
    assert algo.pool.num_credit_mismatches == 0
    assert algo.update_index == 3 and np.array_equal(algo.mu, z_a)  # μ_3 = the z that was evaluated


def test_es_individuals_before_the_critic_answers_are_counted_apart(fake_ray, runner):
    """Past rl_start_steps but without critic weights yet (a GPU critic's first answer can take
    seconds), an individual is an ES one: counted under es_before_rl, not in Eq. (3)'s n_es; once
    the critic has answered, individuals enter Eq. (3)'s counts."""
    algo = make_driver(runner, initial_steps=0, rl_start_steps=0)
    algo._submit_individual()
    assert algo.counters["es_before_rl"] == 1 and algo.counters["n_es"] == algo.counters["n_rl"] == 0
    assert not algo._pending[max(algo._pending)].rl
    algo.critic_ref = ("ref", {})  # the critic's first weights
    algo._submit_individual()
    assert algo.counters["es_before_rl"] == 1 and algo.counters["n_es"] + algo.counters["n_rl"] == 1


def test_rl_individuals_carry_the_newest_critic_and_the_reference_step_count(fake_ray, runner):
    """An RL individual's job names the critic weights current when it is submitted (Alg. 1 l.13:
    the latest critic), and ``auto`` actor steps are the env steps of the last 10 individuals
    (aes-rl's ``batches = sum(last_steps)``); ES individuals carry neither."""
    algo = make_driver(runner, initial_steps=0, rl_start_steps=0, rl_actor_steps="auto")
    algo.pool = AsyncJobPool(FakeGroup([1, 2, 3]), jobs_in_flight=1)  # one runner per individual below
    algo.publish()
    algo.counters["n_es"] = 100  # Eq. (3): n_rl/(n_rl + n_es) = 0 ≪ p_desired, so p_rl = 1
    algo._last_steps.extend([200] * 12)  # a deque of 10: 2000 steps
    algo.critic_ref = ("ref", "critic v1")
    algo._submit_individual()
    algo.critic_ref = ("ref", "critic v2")  # the critic worker answered again
    algo._submit_individual()
    algo.pool.pump()
    jobs = [call.jobs[0] for _, call, _ in algo.pool.group.calls]
    assert [j.critic_ref for j in jobs] == [[("ref", "critic v1")], [("ref", "critic v2")]]
    assert [j.rl_steps for j in jobs] == [2000, 2000]
    algo.counters["n_rl"], algo.counters["n_es"] = 100, 0  # p_rl = 0: an ES individual
    algo._submit_individual()
    algo.pool.pump()
    es = algo.pool.group.calls[2][1].jobs[0]
    assert es.rl_steps == 0 and es.critic_ref is None


def test_rl_individuals_training_time_steps_and_actor_loss_are_counted_and_logged(fake_ray, runner):
    """ERLAlgorithm.collect: every RL job's training seconds count (a failed one's too); its actor
    steps and actor loss only where the training finished; ES individuals add nothing."""
    algo = make_driver(runner, initial_steps=0, rl_start_steps=0, rl_actor_steps=150)
    algo.obs_filter = types.SimpleNamespace(merge=lambda delta: None)
    for key in ("episodes_capped", "episodes_failed", "env_steps", "episodes", *LIFETIME_COUNTERS):
        algo.counters.setdefault(key, 0)
    algo.pool = AsyncJobPool(FakeGroup([1, 2, 3, 4]), jobs_in_flight=1)
    algo.publish()
    algo.critic_ref = ("ref", "critic")
    algo.counters["n_es"] = 100  # p_rl = 1
    algo._submit_individual()
    algo._submit_individual()
    algo._submit_individual()
    algo.counters["n_rl"], algo.counters["n_es"] = 100, 0  # p_rl = 0
    algo._submit_individual()
    algo.pool.pump()
    outcomes = [  # (train_s, trained parameters, failed, actor loss) of the four calls
        (2.0, np.zeros(3, dtype=np.float32), False, -3.0),
        (0.5, None, True, float("nan")),  # the replay was lost mid-training
        (1.0, np.full(3, np.nan, dtype=np.float32), False, float("nan")),  # trained on a diverged critic
        (0.0, None, False, float("nan")),  # an ES individual
    ]
    for (rid, call, ref), (train_s, params, failed, loss) in zip(algo.pool.group.calls, outcomes, strict=True):
        (job,) = call.jobs
        result = ERLResult(
            job=job,
            ret=float("nan") if failed else 1.0,
            returns=() if failed else (1.0,),
            length=0 if failed else 200,
            failed=failed,
            episodes_failed=int(failed),
            runner=rid,
            theta_digest=theta_digest(call.payload_ref[1].theta),
            params=params,
            rl=bool(job.rl_steps),
            actor_loss=loss,
            train_s=train_s,
        )
        ref.reply = Reply(results=[result], busy_s=1.0, runner=rid)
    assert [call.jobs[0].rl_steps for _, call, _ in algo.pool.group.calls] == [150, 150, 150, 0]
    ok, failed = algo.collect(timeout_s=0)
    assert len(ok) == 3 and len(failed) == 1
    assert algo.counters["rl_train_s"] == pytest.approx(3.5)
    assert algo.counters["rl_actor_steps"] == 2 * 150  # the diverged one trained its steps too
    assert algo.metrics.peek(("blackbox", "rl_train_s")) == pytest.approx(3.5 / 3)
    assert algo.metrics.peek(("blackbox", "rl_actor_loss")) == pytest.approx(-3.0)  # no NaN in the mean
