"""AESRL_EXT and CEMRL_EXT (paper 001): the ERL runner, smoke, checkpoints, recovery, bad input."""

import numpy as np
import pytest
import ray

from rllib_ext.algorithms.aesrl.aesrl import AESRLConfig
from rllib_ext.algorithms.cemrl.cemrl import CEMRLConfig
from rllib_ext.common.population import gaussian_individual
from rllib_ext.common.trajectory import ActionExploration, TrajectoryRecorder

# Actor and critics of different sizes on purpose (the critic worker holds both).
TINY = dict(policy_hiddens=[16, 16], critic_hiddens=[24, 24], rl_batch_size=32, rl_actor_steps=20, initial_steps=400)


def aesrl_config(**kw):
    settings = dict(TINY, critic_steps_per_call=50, fixed_range=200.0, fitness_baseline=200.0, mean_eval_episodes=1)
    settings.update(kw)
    return (
        AESRLConfig().environment("Pendulum-v1").env_runners(num_env_runners=2)
        .training(**settings).reporting(min_time_s_per_iteration=None).debugging(seed=0)
    )


def train_until(algo, predicate, max_iters=40):
    result = None
    for _ in range(max_iters):
        result = algo.train()
        if predicate(result):
            return result
    raise AssertionError(f"condition not reached in {max_iters} iterations; last blackbox metrics: {result['blackbox']}")


# -- wrappers ---------------------------------------------------------------------------------
def test_recorder_transitions_and_exploration():
    import gymnasium as gym

    rec = TrajectoryRecorder(gym.make("Pendulum-v1"))
    env = ActionExploration(rec, noise=0.5, seed=0)
    obs, _ = env.reset(seed=0)
    for _ in range(3):
        obs, *_ = env.step(np.array([1.9], dtype=np.float32))
    tr = rec.transitions()
    assert tr["obs"].shape == (3, 3) and tr["next_obs"].shape == (3, 3) and tr["actions"].shape == (3, 1)
    assert np.array_equal(tr["obs"][1:], tr["next_obs"][:-1])
    assert (np.abs(tr["actions"]) <= 2.0).all() and not np.allclose(tr["actions"], 1.9)  # noised, clipped
    assert tr["terminateds"].sum() == 0  # Pendulum only truncates
    env.random_actions = True
    env.step(np.zeros(1, dtype=np.float32))
    assert rec.actions[-1].shape == (1,)


# -- the runner's job protocol ------------------------------------------------------------------
def test_runner_regenerates_individuals_and_fills_replay(ray_session):
    from rllib_ext.common.erl import ERLEnvRunner
    from rllib_ext.common.replay.transitions import ReplayActor

    cfg = aesrl_config()
    runner = ERLEnvRunner(config=cfg)
    mu = runner.module.get_flat()
    var = np.full_like(mu, 1e-2)
    replay = ReplayActor.remote(1000, 3, 1, 0)
    payload = ray.put({"mu": mu, "var": var, "replay": replay})
    out = runner.run_jobs(1, [payload], [{"id": 0, "kind": "individual", "seed": 5}, {"id": 1, "kind": "mean", "episodes": 2}])
    es, mean = out["results"]
    assert es["params"] is None and es["length"] == 200 and np.isfinite(es["return"])  # a seed in, a scalar out
    assert mean["kind"] == "mean" and len(mean["returns"]) == 2 and mean["length"] == 400
    # The runner evaluated exactly the z the driver regenerates from (mu, var, seed).
    runner.module.set_flat(gaussian_individual(mu, var, 5))
    z = runner.module.get_flat()
    assert np.array_equal(z, gaussian_individual(mu, var, 5))
    assert ray.get(replay.size.remote()) == 200  # the individual's episode only, not the mean's
    # An RL individual: trained against critic weights, its new parameters come back.
    from rllib_ext.common.td3 import TwinCritic

    critic = {k: v.numpy() for k, v in TwinCritic(3, 1, (24, 24)).state_dict().items()}
    out = runner.run_jobs(1, [payload], [{"id": 2, "kind": "individual", "seed": 6, "rl_steps": 5, "critic_ref": [ray.put(critic)]}])
    rl = out["results"][0]
    assert rl["rl"] and rl["params"].shape == mu.shape and not np.allclose(rl["params"], gaussian_individual(mu, var, 6))
    runner.stop()


# -- AESRL_EXT ------------------------------------------------------------------------------------
def test_aesrl_trains_checkpoints_restores_and_recovers(ray_session, tmp_path):
    algo = aesrl_config(initial_steps=200).build_algo()
    try:
        result = train_until(algo, lambda r: r["blackbox"].get("n_rl_lifetime", 0) >= 2 and r["blackbox"].get("critic_steps_lifetime", 0) > 0)
        bb = result["blackbox"]
        for key in ("p_rl", "p_mean", "sigma_mean", "f_mu", "replay_size", "worker_utilization", "critic_updates_per_s", "n_es_lifetime"):
            assert key in bb, key
        assert result["env_runners"]["num_env_steps_sampled_lifetime"] == algo.counters["individual_steps"]
        assert np.isfinite(algo.mu).all() and (algo.var >= algo.config.var_limit).all()
        assert algo.update_index > 0
        # RLlib's module holds mu (for `rllib evaluate` and checkpoints).
        learner_theta = algo._on_learner(lambda learner: learner.get_flat())
        assert np.array_equal(learner_theta, algo.mu)
        path = algo.save_to_path(str(tmp_path / "ckpt"))
        mu, var, u, counters = algo.mu.copy(), algo.var.copy(), algo.update_index, dict(algo.counters)
        critic = ray.get(algo.critic.get_state.remote())
        f_mu = algo.population.f_mu
    finally:
        algo.stop()
    restored = type(algo).from_checkpoint(path)
    try:
        assert np.array_equal(restored.mu, mu) and np.array_equal(restored.var, var)
        assert restored.update_index == u and restored.population.f_mu == f_mu
        assert restored.counters["individual_steps"] == counters["individual_steps"]
        assert restored.counters["n_rl"] == counters["n_rl"]
        state = ray.get(restored.critic.get_state.remote())
        for k, v in critic["critic"].items():
            assert np.array_equal(state["critic"][k], v)
        assert state["num_critic_steps"] == critic["num_critic_steps"]
        restored.train()
        assert restored.update_index >= u
        # Kill the critic worker and the replay actor: both are re-created (logged, counted), training goes on.
        ray.kill(restored.critic)
        ray.kill(restored.replay)
        train_until(
            restored,
            lambda r: r["blackbox"]["critic_worker_restarts_lifetime"] + r["blackbox"]["replay_actor_restarts_lifetime"] >= 1,
        )
        before = restored.update_index
        train_until(restored, lambda r: restored.update_index > before + 2)
        assert np.isfinite(restored.mu).all()
    finally:
        restored.stop()


def test_aesrl_interpolated_f_mu_with_one_plus_one_and_success_rule(ray_session):
    """The other f(μ) estimate and rule pair end to end (every rule is unit-tested in test_aesrl_rules)."""
    algo = aesrl_config(mean_rule="one_plus_one", variance_rule="success_rule", mean_fitness="interpolate",
                        success_window=3, initial_steps=10_000).build_algo()
    try:
        result = train_until(algo, lambda r: algo.update_index >= 4)
        assert result["blackbox"]["mean_eval_env_steps_lifetime"] == 200  # f(μ_0) only: one episode
        assert np.isfinite(algo.mu).all() and np.isfinite(algo.var).all()
    finally:
        algo.stop()


def test_aesrl_critic_floor_holds_individuals_until_the_critic_catches_up(ray_session):
    """critic_min_steps_per_env_step: no individual starts while the critic is below its floor."""
    floor, per_call = 1.0, 50
    algo = aesrl_config(initial_steps=400, critic_min_steps_per_env_step=floor, critic_steps_per_call=per_call).build_algo()
    try:
        start = algo.config.effective_rl_start_steps
        result = train_until(algo, lambda r: algo.counters["individual_steps"] >= start + 1200)
        steps, critic = algo.counters["individual_steps"], algo.counters["critic_steps"]
        # Individuals already running when the floor was reached finish: at most one 200-step
        # Pendulum episode per job slot beyond it.
        slots = algo.config.num_env_runners * algo.config.jobs_in_flight_per_env_runner
        assert critic + per_call >= floor * (steps - start - slots * 200), (steps, critic)
        assert result["blackbox"]["critic_wait_s_lifetime"] > 0
    finally:
        algo.stop()


# -- CEMRL_EXT ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_cemrl_generations(ray_session, tmp_path, mode):
    cfg = (
        CEMRLConfig().environment("Pendulum-v1").env_runners(num_env_runners=2)
        .training(mode=mode, population_size=4, rl_population=2, **TINY)
        .reporting(min_time_s_per_iteration=None).debugging(seed=0)
    )
    algo = cfg.build_algo()
    try:
        mu0 = algo.mu.copy()
        for _ in range(2):
            result = algo.train()
        bb = result["blackbox"]
        assert bb["n_rl_lifetime"] == 2 and bb["n_es_lifetime"] == 6  # RL from generation 2 (after 800 > 400 steps)
        assert result["env_runners"]["num_env_steps_sampled_lifetime"] == 2 * 4 * 200
        assert bb["critic_steps_lifetime"] > 0 and algo.cem.generation == 2
        assert not np.array_equal(algo.mu, mu0) and np.isfinite(algo.mu).all()
        if mode == "parallel":  # checkpoint round trip (once: the same code path in both modes)
            path = algo.save_to_path(str(tmp_path / "ckpt"))
            cem, counters = algo.cem.get_state(), dict(algo.counters)
            critic = ray.get(algo.critic.get_state.remote())
    finally:
        algo.stop()
    if mode == "parallel":
        restored = type(algo).from_checkpoint(path)
        try:
            state = restored.cem.get_state()
            assert np.array_equal(state["mu"], cem["mu"]) and np.array_equal(state["var"], cem["var"])
            assert state["damp"] == cem["damp"] and state["generation"] == 2
            assert restored.prev_generation_steps == 800 and restored.counters["n_rl"] == counters["n_rl"]
            got = ray.get(restored.critic.get_state.remote())
            assert all(np.array_equal(got["critic"][k], v) for k, v in critic["critic"].items())
            restored.train()
            assert restored.cem.generation == 3
        finally:
            restored.stop()


# -- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "env, settings, match",
    [
        ("CartPole-v1", {}, "continuous"),
        ("Pendulum-v1", {"observation_filter": True}, "observation_filter"),
        ("Pendulum-v1", {"variance_rule": "elite"}, "elite"),
        ("Pendulum-v1", {"mean_rule": "bogus"}, "mean_rule"),
        ("Pendulum-v1", {"sigma_init": 0.0}, "sigma_init"),
        ("Pendulum-v1", {"p_desired": 1.5}, "p_desired"),
        ("Pendulum-v1", {"tau": 0.0}, "tau"),
        ("Pendulum-v1", {"critic_min_steps_per_env_step": 2.0}, "critic_min_steps_per_env_step"),
        ("Pendulum-v1", {"common_random_numbers": True}, "common_random_numbers"),
    ],
)
def test_aesrl_bad_input_is_one_clear_error(env, settings, match):
    cfg = AESRLConfig().environment(env).training(**{"fixed_range": 250.0, "fitness_baseline": 250.0, **settings})
    with pytest.raises(ValueError, match=match):
        cfg.validate()


def test_cemrl_bad_input():
    with pytest.raises(ValueError, match="mode"):
        CEMRLConfig().environment("Pendulum-v1").training(mode="async").validate()
    with pytest.raises(ValueError, match="even"):
        CEMRLConfig().environment("Pendulum-v1").training(population_size=5).validate()
    with pytest.raises(ValueError, match="rl_population"):
        CEMRLConfig().environment("Pendulum-v1").training(rl_population=11).validate()


def test_table_5_values_resolve_per_env():
    from rllib_ext.algorithms.aesrl.aesrl import TABLE_5

    cfg = AESRLConfig().environment("Hopper-v5")
    assert cfg.effective_fixed_range == TABLE_5["Hopper"] == 600.0
    assert cfg.effective_fitness_baseline == 600.0 and cfg.effective_p_desired == 0.5
    cfg.training(mean_rule="baseline_absolute")
    assert cfg.effective_fitness_baseline == -600.0
    assert AESRLConfig().environment("Swimmer-v5").effective_p_desired == 0.1
    with pytest.raises(ValueError, match="Table 5"):
        AESRLConfig().environment("Pendulum-v1").validate()  # no Table 5 value: must be set
