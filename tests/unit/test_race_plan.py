"""benchmarks.harness.race: every check of a race runs before Ray starts and names what is wrong."""

from __future__ import annotations

import json

import pytest

from benchmarks.harness import race

COMMON = {
    "model_config": {"fcnet_hiddens": [16]},
    "num_env_runners": 1,
    "num_envs_per_env_runner": 1,
    "rollout_fragment_length": 50,
    "num_learners": 0,
    "min_time_s_per_iteration": 1,
}


def plan(*extra, common=COMMON, algos=("IMPACT_EXT", "APPO")):
    argv = ["--algos", *algos, "--env", "CartPole-v1", "--budget-env-steps", "100", "--eval-every-env-steps", "50"]
    args, own = race.parse_args([*argv, "--common", json.dumps(common), *extra])
    return race.plan(args, own)


def test_a_valid_race_records_shared_and_own_settings():
    impact, appo = plan("--set", "IMPACT_EXT:lr=0.001", "--set", "APPO:vf_loss_coeff=0.05")
    assert impact.settings["lr"] == 0.001 and "lr" not in appo.settings
    for key in race.EXECUTION_KEYS:
        assert impact.settings[key] == appo.settings[key]
    assert impact.settings["model_config"] == appo.settings["model_config"] == COMMON["model_config"]
    assert impact.settings["threads"] == 1 and impact.settings["torch_num_threads"] == 1
    assert impact.evaluate is race.evaluate_on_rllib_runner
    assert impact.config.evaluation_interval == race.NEVER  # train() never evaluates by itself


def test_blackbox_algorithms_evaluate_on_their_own_runner():
    (es,) = plan(common={"policy_hiddens": [8], "num_env_runners": 1}, algos=("ES_EXT",))
    assert es.evaluate is race.evaluate_on_blackbox_runner


def test_a_per_algorithm_set_may_not_override_a_common_setting():
    with pytest.raises(race.RaceError, match="APPO:num_env_runners overrides a --common setting"):
        plan("--set", "APPO:num_env_runners=2")
    # ... unless the race declares it variable.
    plan("--set", "APPO:num_env_runners=2", "--variable", "num_env_runners")


def test_execution_settings_must_match():
    common = {k: v for k, v in COMMON.items() if k != "num_learners"}
    with pytest.raises(race.RaceError, match=r"num_learners differs .*IMPACT_EXT=0, APPO=1.*--common"):
        plan(common=common)


def test_the_network_must_be_common():
    common = {k: v for k, v in COMMON.items() if k != "model_config"}
    with pytest.raises(race.RaceError, match="network in --common"):
        plan(common=common)


def test_unknown_algorithm_and_bad_config_name_the_algorithm():
    with pytest.raises(race.RaceError, match="unknown algorithm 'NOPE'"):
        plan(algos=("NOPE",))
    with pytest.raises(race.RaceError, match="^APPO: .*no config key 'not_a_key'"):
        plan("--set", "APPO:not_a_key=1")


def test_an_algorithm_the_race_cannot_evaluate_is_named():
    from ray.rllib.algorithms.ppo import PPO
    from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner

    config = PPO.get_default_config().env_runners(env_runner_cls=MultiAgentEnvRunner)
    with pytest.raises(race.RaceError, match="^PPO: the race cannot evaluate it"):
        race.evaluator_for("PPO", PPO, config)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--budget-env-steps", "0"], "must be > 0"),
        (["--set", "APPO=1"], "ALGO:KEY=JSON"),
        (["--set", "APPO:lr=x"], "not JSON"),
        (["--common", "[1]"], "JSON object"),
        (["--seeds", "1", "1"], "must not repeat"),
    ],
)
def test_bad_arguments_are_usage_errors(argv, message, capsys):
    base = ["--algos", "APPO", "--env", "CartPole-v1", "--budget-env-steps", "100", "--eval-every-env-steps", "50"]
    with pytest.raises(SystemExit) as e:
        race.parse_args([*base, *argv])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_no_budget_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        race.parse_args(["--algos", "APPO", "--env", "CartPole-v1", "--eval-every-env-steps", "50"])
    assert "--budget-env-steps and/or --budget-s" in capsys.readouterr().err


def test_env_steps_of_reads_either_place():
    assert race.env_steps_of({"num_env_steps_sampled_lifetime": 7}) == 7
    assert race.env_steps_of({"env_runners": {"num_env_steps_sampled_lifetime": 9}}) == 9
    with pytest.raises(KeyError):
        race.env_steps_of({})
