"""ES_EXT: validation, smoke, checkpoint round trip, evaluate, runner loss, faulty envs, learning."""

from __future__ import annotations

import numpy as np
import pytest
import ray

from rllib_ext import ESConfig, cli

VAR_ENV = "rllib_ext/VariableLength-v0"


def small_config(env=VAR_ENV, env_config=None, runners=1, **training):
    training = {"episodes_per_batch": 8, "policy_hiddens": [8], **training}
    return (
        ESConfig()
        .environment(env, env_config={"min_len": 5, "max_len": 15} if env_config is None else env_config)
        .env_runners(num_env_runners=runners)
        .training(**training)
        .debugging(seed=0)
        .reporting(min_time_s_per_iteration=None)  # one update per train() call in these tests
    )


@pytest.mark.parametrize(
    "training,match",
    [
        ({"noise_stdev": 0.0}, "noise_stdev"),
        ({"noise_stdev": -1.0}, "noise_stdev"),
        ({"episodes_per_batch": 0}, "episodes_per_batch"),
        ({"episodes_per_batch": 7}, "must be even"),
        ({"sampler": "sobol"}, "sampler"),
        ({"optimizer": "adamw"}, "optimizer"),
        ({"return_shaping": "rank"}, "return_shaping"),
        ({"perturbations_per_call": 0}, "perturbations_per_call"),
        ({"obs_clip": -5.0}, "obs_clip"),
    ],
)
def test_invalid_hyperparameters_fail_validate(training, match):
    with pytest.raises(ValueError, match=match):
        small_config(**training).validate()


def test_cli_rejects_invalid_sigma_before_ray(capsys):
    rc = cli.main(["train", "--algo", "ES_EXT", "--env", "CartPole-v1", "--config", '{"noise_stdev": 0}'])
    assert rc == cli.USAGE_ERROR
    assert "noise_stdev" in capsys.readouterr().err


def test_wrong_action_space_is_a_clear_error(ray_session):
    config = small_config(env="CartPole-v1", env_config={}, policy_head="gaussian_2a")
    with pytest.raises(Exception, match="needs a Box action space"):
        config.build_algo()


def test_smoke_checkpoint_round_trip_and_evaluate(ray_session, tmp_path, capsys):
    algo = small_config(optimizer="dsgd", eval_episodes=2).build_algo()
    try:
        for _ in range(2):
            result = algo.train()
        assert result["blackbox"]["update_index"] == 2
        assert result["num_env_steps_sampled_lifetime"] >= 2 * 8 * 5
        assert np.isfinite(result["env_runners"]["episode_return_mean"])
        ckpt = str(tmp_path / "ckpt")
        algo.save_to_path(ckpt)
        theta, u = algo.theta.copy(), algo.update_index
        filter_state = algo.obs_filter.get_state()
        opt_state = algo._on_learner(lambda l: next(iter(l._named_optimizers.values())).state_dict())
    finally:
        algo.stop()

    restored = small_config(optimizer="dsgd", eval_episodes=2).build_algo()
    try:
        restored.restore_from_path(ckpt)
        np.testing.assert_array_equal(restored.theta, theta)
        assert restored.update_index == u
        assert restored.obs_filter.stats.n == filter_state["stats"]["num_pushes"] > 0
        np.testing.assert_array_equal(restored.obs_filter.stats.mean, algo.obs_filter.stats.mean)
        opt_restored = restored._on_learner(lambda l: next(iter(l._named_optimizers.values())).state_dict())
        assert opt_restored["dsgd"] == opt_state["dsgd"]  # η_u, reward window and u of DSGD
        assert restored.train()["blackbox"]["update_index"] == u + 1  # continues, not restarts
    finally:
        restored.stop()

    assert cli.main(["evaluate", ckpt, "--episodes", "3", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "mean return" in out and out.count("episode ") >= 3


def test_killed_runner_mid_batch_batch_completes_and_loss_is_counted(ray_session):
    config = small_config(runners=2, episodes_per_batch=16, perturbations_per_call=1,
                          env_config={"min_len": 20, "max_len": 20, "step_sleep_s": 0.002})
    algo = config.build_algo()
    try:
        algo.train()
        victim = algo.pool.healthy_runner_ids()[0]
        # Queue a batch, let calls start on both runners, then kill one of them.
        seed = algo.next_batch_seed()
        algo.submit_perturbations(seed, 16)
        algo.pool.pump()
        assert algo.pool._in_flight[victim]
        ray.kill(algo.env_runner_group._worker_manager._actors[victim], no_restart=False)
        got = {}
        for _ in range(2000):
            ok, _ = algo.collect(timeout_s=0.05)
            got.update({r["index"]: r for r in ok if r["seed"] == seed})
            if len(got) == 16:
                break
        assert sorted(got) == list(range(16))  # every perturbation evaluated, on the survivor
        assert algo.pool.num_calls_lost >= 1 and algo.pool.num_jobs_requeued >= 1
        result = algo.train()  # RLlib restarts the runner; training goes on
        assert result["blackbox"]["runner_calls_lost_lifetime"] >= 1
        assert result["blackbox"]["update_index"] == 2
    finally:
        algo.stop()


def test_faulty_env_episodes_are_counted_and_skipped_not_learned_from(ray_session):
    config = small_config(env="rllib_ext/Faulty-v0", env_config={"fault": "nan_obs", "fault_prob": 0.3})
    algo = config.build_algo()
    try:
        for _ in range(3):
            result = algo.train()
        assert result["blackbox"]["episodes_failed_lifetime"] > 0
        assert np.all(np.isfinite(algo.theta))
        assert np.isfinite(result["env_runners"]["episode_return_mean"])
    finally:
        algo.stop()


def test_env_that_always_fails_stops_with_a_clear_error(ray_session):
    algo = small_config(env="rllib_ext/Faulty-v0", env_config={"fault": "raise", "fault_prob": 1.0}).build_algo()
    try:
        with pytest.raises(Exception, match="env keeps failing"):
            algo.train()
    finally:
        algo.stop()


def test_learns_the_variable_length_task(ray_session):
    """Short CI learning test: random play gets ~50% of the optimal return (= episode length)."""
    config = small_config(env_config={"min_len": 10, "max_len": 30}, episodes_per_batch=20,
                          noise_stdev=0.1, lr=0.05, eval_episodes=4)
    algo = config.build_algo()
    try:
        best = 0.0
        for _ in range(40):
            result = algo.train()
            bb = result["blackbox"]
            best = max(best, bb["eval_return_mean"] / 20.0)  # mean episode length is 20
            if best >= 0.9:
                break
        assert best >= 0.9, f"ES_EXT reached only {best:.2f} of the optimal return"
    finally:
        algo.stop()
