"""Hostile input (issue 9): one clear error naming the setting and the value, before any actor starts.

Table-driven over every registered algorithm: each bad setting the algorithm has (σ ≤ 0, N < 1,
K < 1, c_max ≤ 1, D outside (0, 1), unknown optimizer/sampler, NaN/inf), an action space it
cannot take (discrete to continuous-only and the reverse) and observation spaces it cannot
take (Dict, image). ``config.validate()`` is what ``build_algo()`` and ``rllib train`` run
first; a few cases go through ``build_algo()`` and the CLI to show that.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from ray.rllib.callbacks.callbacks import RLlibCallback

from tests.helpers import assert_clean_error, run_cli_subprocess
from tests.reliability.helpers import (
    EPISODE_LENGTHS,
    NAMES,
    VAR_ENV,
    config_class,
    for_variable_length_env,
    supports_continuous,
    supports_discrete,
)

# (kind, setting, bad values): a row applies to every algorithm whose config has the setting
# (the black-box family refuses RLlib's train batch size: its batch is episodes_per_batch).
SETTING_ROWS = [
    ("sigma", "noise_stdev", [0.0, -0.1]),
    ("sigma", "exploration_sigma", [0.0, -0.1]),
    ("sigma", "phi_noise_stdev", [0.0]),
    ("sigma", "policy_noise", [-0.1]),
    ("sigma", "action_noise", [-0.1]),
    ("sigma", "sigma_init", [0.0, -1e-3]),
    ("N", "episodes_per_batch", [0, -4]),
    ("N", "circular_buffer_num_batches", [0]),
    ("N", "population_size", [0]),
    ("N", "num_elites", [0]),
    ("N", "train_batch_size_per_learner", [0]),
    ("K", "circular_buffer_iterations_per_batch", [0, -1]),
    ("c_max", "refer_C", [0.0, -1.0]),
    ("D", "refer_D", [0.0, 1.0, 1.5, -0.1]),
    ("name", "optimizer", ["adamw_nope"]),
    ("name", "sampler", ["sobol_nope"]),
    ("kwargs", "optimizer_kwargs", [[0.9], "lr=0.1"]),
    ("threads", "torch_num_threads", [0, 1.5]),
    ("nonfinite", "lr", [math.nan, math.inf]),
    ("nonfinite", "gamma", [math.nan]),
    ("nonfinite", "noise_stdev", [math.nan, math.inf]),
    ("nonfinite", "exploration_sigma", [math.nan]),
    ("nonfinite", "refer_C", [math.nan]),
    ("nonfinite", "target_worker_clipping", [math.nan]),
    ("nonfinite", "clip_param", [math.nan]),
]

# Action kinds each known algorithm takes; an algorithm registered later must take at least one
# and reject the other with a message naming the action space.
EXPECTED_ACTIONS = {
    "IMPACT_EXT": {"discrete", "continuous"},
    "ES_EXT": {"discrete", "continuous"},
    "DFD_EXT": {"discrete", "continuous"},
    "CVES_EXT": {"discrete", "continuous"},
    "ARS_EXT": {"discrete", "continuous"},
    "VRACER_EXT": {"continuous"},
    "DDPG_EXT": {"continuous"},
    "NAF_EXT": {"continuous"},
    "TD3_EXT": {"continuous"},
    "AESRL_EXT": {"continuous"},
    "CEMRL_EXT": {"continuous"},
}


def base_config(name, continuous=None):
    return for_variable_length_env(name, supports_continuous(name) if continuous is None else continuous)


def setting_cases():
    cases = []
    for name in NAMES:
        config = config_class(name)()
        for kind, setting, values in SETTING_ROWS:
            if not hasattr(config, setting):
                continue
            if kind == "name" and not isinstance(getattr(config, setting), str):
                continue  # RLlib's old-stack `optimizer` dict: the algorithm has no optimizer choice
            for value in values:
                cases.append(pytest.param(name, setting, value, id=f"{name}-{kind}-{setting}={value}"))
    return cases


def error_of(config) -> str:
    with pytest.raises(ValueError) as info:
        config.validate()
    return str(info.value).splitlines()[0]


@pytest.mark.parametrize("name,setting,value", setting_cases())
def test_bad_setting_is_one_clear_error_naming_setting_and_value(name, setting, value):
    config = base_config(name)
    setattr(config, setting, value)  # as update_from_dict / the CLI's --config would
    message = error_of(config)
    assert setting in message, message
    assert repr(value) in message or str(value) in message, message


BLACKBOX_NAMES = [n for n in NAMES if hasattr(config_class(n), "runners_use_gpus")]


@pytest.mark.parametrize("name", BLACKBOX_NAMES)
def test_runner_gpus_are_refused_where_the_runners_would_leave_them_idle(name):
    """Black-box runners only run episodes on the CPU; ERL's also train RL individuals, on a GPU if given."""
    config = base_config(name).env_runners(num_gpus_per_env_runner=0.5)
    if config_class(name).runners_use_gpus:
        config.validate()
    else:
        message = error_of(config)
        assert "num_gpus_per_env_runner=0.5" in message and "set it to 0" in message, message


def test_every_algorithm_has_the_issue_settings_it_should():
    """The table is not vacuous: each family's σ/N/K/c_max/D/name settings are really checked."""
    covered = {}
    for case in setting_cases():
        name, setting, _ = case.values
        covered.setdefault(name, set()).add(setting)
    expect = {
        "IMPACT_EXT": {"circular_buffer_num_batches", "circular_buffer_iterations_per_batch", "optimizer", "lr"},
        "ES_EXT": {"noise_stdev", "episodes_per_batch", "optimizer", "sampler", "lr"},
        "DFD_EXT": {"noise_stdev", "episodes_per_batch", "optimizer", "sampler"},
        "CVES_EXT": {"noise_stdev", "phi_noise_stdev", "episodes_per_batch", "sampler"},
        "ARS_EXT": {"noise_stdev", "episodes_per_batch", "optimizer", "sampler", "lr"},
        "VRACER_EXT": {"refer_C", "refer_D", "optimizer", "train_batch_size_per_learner"},
        "DDPG_EXT": {"refer_C", "refer_D", "exploration_sigma"},
        "NAF_EXT": {"refer_C", "refer_D", "exploration_sigma"},
        "TD3_EXT": {"action_noise", "policy_noise", "train_batch_size_per_learner", "optimizer"},
        "AESRL_EXT": {"sigma_init", "action_noise", "optimizer"},
        "CEMRL_EXT": {"sigma_init", "population_size", "num_elites", "optimizer"},
    }
    for name, settings in expect.items():
        if name in covered:
            assert settings <= covered[name], (name, settings - covered[name])


def test_vracer_initial_sigma_must_be_positive():
    config = base_config("VRACER_EXT").rl_module(model_config={"init_sigma": 0.0})
    assert "init_sigma" in error_of(config)


# ------------------------------------------------------------------------------------------
# Spaces.
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_action_spaces_supported_or_rejected_by_name(name):
    supported = {
        kind for kind, ok in (("discrete", supports_discrete(name)), ("continuous", supports_continuous(name))) if ok
    }
    assert supported, f"{name} takes neither a Discrete nor a Box action space"
    if name in EXPECTED_ACTIONS:
        assert supported == EXPECTED_ACTIONS[name]
    for kind in {"discrete", "continuous"} - supported:
        message = error_of(base_config(name, continuous=kind == "continuous"))
        assert "action space" in message and ("Discrete" in message or "Box" in message), message


class DictObsEnv(gym.Env):
    """A Dict observation space (no rllib_ext algorithm flattens observations itself)."""

    def __init__(self, config=None):
        continuous = bool((config or {}).get("continuous", True))
        self.observation_space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (3,)), "flag": gym.spaces.Discrete(2)})
        self.action_space = gym.spaces.Box(-1, 1, (1,)) if continuous else gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, True, False, {}


class SmallImageEnv(DictObsEnv):
    """An 8×8 RGB image observation (no MLP-on-state algorithm takes it; RLlib has no CNN for 8×8)."""

    def __init__(self, config=None):
        super().__init__(config)
        self.observation_space = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)


@pytest.mark.parametrize("env_cls", [DictObsEnv, SmallImageEnv], ids=["dict", "image"])
@pytest.mark.parametrize("name", NAMES)
def test_observation_space_it_cannot_take_is_rejected(name, env_cls):
    continuous = supports_continuous(name)
    config = for_variable_length_env(name, continuous).environment(env_cls, env_config={"continuous": continuous})
    message = error_of(config)
    assert "observation space" in message or "obs space" in message, message


# ------------------------------------------------------------------------------------------
# RLlib settings an algorithm does not read: refused by name, never silently ignored (issue 39
# §5, found by running RLlib's example scripts with --algo NAME); honoured elsewhere.
# ------------------------------------------------------------------------------------------
def _mean_std_filter(env=None, spaces=None, device=None):
    from ray.rllib.connectors.env_to_module.mean_std_filter import MeanStdFilter

    return MeanStdFilter(multi_agent=False)  # connectors/mean_std_filtering.py's


def _learner_connector(input_observation_space=None, input_action_space=None):
    from ray.rllib.connectors.learner.add_one_ts_to_episodes_and_truncate import AddOneTsToEpisodesAndTruncate

    return AddOneTsToEpisodesAndTruncate()


class EpisodeMetrics(RLlibCallback):
    """An env-runner hook, as RLlib's examples/metrics/custom_metrics_in_env_runners.py has."""

    def on_episode_end(self, *, episode, metrics_logger=None, **kwargs):
        metrics_logger.log_value("my_metric", 1.0)


BLACKBOX = {"ES_EXT", "DFD_EXT", "CVES_EXT", "ARS_EXT"}
ERL = {"AESRL_EXT", "CEMRL_EXT"}
REPLAY = {"TD3_EXT", "VRACER_EXT", "DDPG_EXT", "NAF_EXT"}
# (id, how to set it, what the message names, algorithms that refuse it): every other known
# algorithm reads the setting and must validate with it.
UNREAD_SETTING_ROWS = [
    (
        "env_to_module",
        ("env_runners", {"env_to_module_connector": _mean_std_filter}),
        "env_to_module_connector",
        BLACKBOX | ERL,
    ),
    (
        "module_to_env",
        ("env_runners", {"module_to_env_connector": _mean_std_filter}),
        "module_to_env_connector",
        BLACKBOX | ERL,
    ),
    (
        "learner_connector",
        ("training", {"learner_connector": _learner_connector}),
        "learner_connector",
        BLACKBOX | ERL | REPLAY,
    ),
    ("use_lstm", ("rl_module", {"model_config": {"use_lstm": True}}), "use_lstm", BLACKBOX | ERL | REPLAY),
    ("num_envs", ("env_runners", {"num_envs_per_env_runner": 2}), "num_envs_per_env_runner", BLACKBOX | ERL),
    ("explore", ("env_runners", {"explore": False}), "explore", BLACKBOX | ERL),
    ("gamma", ("training", {"gamma": 0.98}), "gamma", {"ES_EXT", "DFD_EXT", "ARS_EXT"}),
    ("lr", ("training", {"lr": 0.1}), "lr", {"TD3_EXT", "DDPG_EXT"} | ERL),
    ("grad_clip", ("training", {"grad_clip": 1.0}), "grad_clip", BLACKBOX | ERL | {"TD3_EXT"}),
    ("batch", ("training", {"train_batch_size_per_learner": 100}), "train_batch_size_per_learner", BLACKBOX | ERL),
    ("num_epochs", ("training", {"num_epochs": 2}), "num_epochs", set(EXPECTED_ACTIONS)),
    ("minibatch_size", ("training", {"minibatch_size": 16}), "minibatch_size", set(EXPECTED_ACTIONS)),
    ("clip_rewards", ("environment", {"clip_rewards": True}), "clip_rewards", BLACKBOX | ERL | REPLAY),
    # RLlib's old-stack filter: ignored by RLlib's new stack; the black-box flag is a bool.
    (
        "old_filter",
        ("env_runners", {"observation_filter": "MeanStdFilter"}),
        "observation_filter",
        set(EXPECTED_ACTIONS),
    ),
    ("callbacks", ("callbacks", {"callbacks_class": EpisodeMetrics}), "on_episode_end", BLACKBOX | ERL),
]


@pytest.mark.parametrize("row", UNREAD_SETTING_ROWS, ids=[r[0] for r in UNREAD_SETTING_ROWS])
@pytest.mark.parametrize("name", NAMES)
def test_a_setting_is_honoured_or_refused_by_name(name, row):
    _, (method, kwargs), setting, refusing = row
    config = base_config(name)
    getattr(config, method)(**kwargs)
    if name in refusing:
        message = error_of(config)
        assert setting in message, message
        if setting == "env_to_module_connector":  # the family's own filter is the same idea
            assert "observation_filter" in message, message
    elif name in EXPECTED_ACTIONS:
        config.validate()


@pytest.mark.parametrize("name", NAMES)
def test_settings_at_their_defaults_are_never_refused(name):
    """RLlib's defaults, given explicitly, are accepted (a DefaultModelConfig carries all of its own)."""
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    config = base_config(name)
    config.env_runners(explore=True, num_envs_per_env_runner=1).rl_module(model_config=DefaultModelConfig())
    config.training(num_epochs=config.num_epochs, grad_clip=config.grad_clip, lr=config.lr, gamma=config.gamma)
    config.validate()


@pytest.mark.parametrize("name", NAMES)
def test_a_user_module_without_what_the_learner_uses_is_refused(name):
    """RLlib's custom LSTM module (examples/rl_modules/classes) has no target network, and is not
    the black-box policy, TD3's or ReF-ER's networks: refused at validate(), not in a learner."""
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.lstm_containing_rlm import LSTMContainingRLModule

    config = base_config(name).rl_module(rl_module_spec=RLModuleSpec(module_class=LSTMContainingRLModule))
    message = error_of(config)
    assert "LSTMContainingRLModule" in message and "rl_module_spec" in message, message


@pytest.mark.parametrize("name", NAMES)
def test_a_multi_agent_env_is_named_as_such(name):
    """Not "needs a 1-d Box observation space; env has None": multi-agent is what is not supported."""
    from ray.rllib.examples.envs.classes.multi_agent import MultiAgentPendulum

    config = base_config(name).environment(MultiAgentPendulum, env_config={"num_agents": 2})
    message = error_of(config)
    assert "MultiAgentEnv" in message and "observation space" not in message, message
    if name != "IMPACT_EXT":  # IMPACT_EXT trains several policies (it asks for them)
        assert f"{name} does not support multi-agent" in message, message
        policies = base_config(name).multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *a, **k: "p0")
        assert f"{name} does not support multi-agent" in error_of(policies)


def test_env_that_cannot_be_created_is_named():
    config = base_config("ES_EXT").environment(VAR_ENV, env_config={"min_len": 9, "max_len": 3})
    message = error_of(config)
    assert "cannot create env" in message and VAR_ENV in message


# ------------------------------------------------------------------------------------------
# Through build_algo(): the error comes before any env runner actor is created.
# ------------------------------------------------------------------------------------------
BUILD_CASES = [
    ("VRACER_EXT", "CartPole-v1", {}, "action space"),
    ("DDPG_EXT", VAR_ENV, {"refer_D": 1.5}, "refer_D"),
    ("IMPACT_EXT", VAR_ENV, {"circular_buffer_iterations_per_batch": 0}, "circular_buffer_iterations_per_batch"),
    ("DFD_EXT", VAR_ENV, {"noise_stdev": -1.0}, "noise_stdev"),
    ("ES_EXT", VAR_ENV, {"sampler": "sobol_nope"}, "sobol_nope"),
]


@pytest.mark.parametrize("name,env,settings,fragment", BUILD_CASES, ids=[c[0] + "-" + c[3] for c in BUILD_CASES])
def test_build_algo_fails_before_env_runners_start(monkeypatch, name, env, settings, fragment):
    from ray.rllib.env.env_runner_group import EnvRunnerGroup

    def no_actors(*args, **kwargs):
        raise AssertionError("env runners were being created for an invalid config")

    monkeypatch.setattr(EnvRunnerGroup, "__init__", no_actors)
    config = config_class(name)().environment(env, env_config=EPISODE_LENGTHS if env == VAR_ENV else {})
    config.update_from_dict(settings)
    with pytest.raises(ValueError, match=fragment):
        config.build_algo()


# ------------------------------------------------------------------------------------------
# Through `rllib train`: one `rllib: error:` line, exit status 2, Ray never started.
# ------------------------------------------------------------------------------------------
CLI_CASES = [
    ("NAF_EXT", "CartPole-v1", "{}", ["NAF_EXT needs a continuous", "Discrete(2)"]),
    ("IMPACT_EXT", "CartPole-v1", '{"circular_buffer_num_batches": 0}', ["circular_buffer_num_batches", "got 0"]),
    ("ES_EXT", "CartPole-v1", '{"lr": NaN}', ["lr", "nan"]),
]


@pytest.mark.parametrize("name,env,config,fragments", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_reports_one_error_line_before_ray_starts(name, env, config, fragments):
    proc = run_cli_subprocess(["train", "--algo", name, "--env", env, "--config", config])
    assert_clean_error(proc, "invalid config for", *fragments)
    assert "RAY_STARTED=False" in proc.stdout
