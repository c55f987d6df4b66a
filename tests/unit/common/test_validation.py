"""rllib_ext.common.validation: the checks every algorithm's ``validate()`` shares (no Ray)."""

from __future__ import annotations

import math

import gymnasium as gym
import pytest
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole, MultiAgentPendulum

from rllib_ext import ESConfig, IMPACTConfig
from rllib_ext.algorithms.impact.impact import IMPACT
from rllib_ext.common import validation as v

VAR_ENV = "rllib_ext/VariableLength-v0"


def test_integer_and_number_exclude_bools():
    assert v.is_integer(3) and not v.is_integer(True) and not v.is_integer(3.0)
    assert v.is_number(3) and v.is_number(0.5) and not v.is_number(False) and not v.is_number("1")


def test_algo_name_is_the_registered_name_else_the_class_name():
    assert v.algo_name(IMPACTConfig()) == "IMPACT_EXT"  # a config: its algo_class
    assert v.algo_name(IMPACT) == "IMPACT_EXT"  # a class

    class Unregistered(IMPACT):
        pass

    assert v.algo_name(Unregistered) == "Unregistered"  # the name is not inherited
    assert v.algo_name(PPOConfig()) == "PPO"
    assert v.algo_name(PPOConfig(algo_class="SOME_NAME")) == "SOME_NAME"


def test_minus_one_settings_survive_get_state_but_rllib_sentinels_do_not():
    """RLlib's get_state() drops every -1 (its deprecated-value sentinel): the mixin keeps ours."""
    ppo = PPOConfig()
    ppo.lr = -1
    assert "lr" not in ppo.get_state()  # what the mixin is for
    state = ESConfig().training(noise_stdev=-1).get_state()
    assert state["noise_stdev"] == -1  # validate() then rejects it instead of using the default
    assert "min_iter_time_s" not in state  # a deprecated RLlib setting whose default is -1


def test_nonfinite_settings_are_named_with_their_path():
    config = PPOConfig().rl_module(model_config={"fcnet_hiddens": [1.0, math.inf]})
    config.lr = math.nan
    config.optimizer_kwargs = {"eps": -math.inf}
    config.env_config = {"belongs_to_the_env": math.nan}  # not checked
    config.sample_timeout_s = math.inf  # a timeout may be +inf
    names = [name for name, _ in v.nonfinite_settings(config)]
    assert names == ["lr", "model_config['fcnet_hiddens'][1]", "optimizer_kwargs['eps']"]
    with pytest.raises(ValueError, match=r"PPO: settings must be finite numbers, got `lr` = nan, .*'eps'\]` = -inf"):
        v.check_finite_settings(config)
    v.check_finite_settings(PPOConfig())  # the defaults are finite


def test_check_optimizer_names_the_setting():
    config = IMPACTConfig().training(optimizer="rmsprop")
    with pytest.raises(ValueError, match="`optimizer`: Unknown optimizer 'rmsprop'"):
        v.check_optimizer(config)
    with pytest.raises(ValueError, match="`optimizer_kwargs` must be a dict"):
        v.check_optimizer(IMPACTConfig().training(optimizer_kwargs=[0.9]))
    v.check_optimizer(IMPACTConfig().training(optimizer="DSGD", optimizer_kwargs={"M": 4}))


def test_env_spaces_from_one_driver_env_or_from_the_config():
    obs, act = v.env_spaces(PPOConfig().environment("CartPole-v1"))
    assert obs.shape == (4,) and act == gym.spaces.Discrete(2)
    obs, act = v.env_spaces(PPOConfig().environment(VAR_ENV, env_config={"continuous": True}))  # a Tune-registered env
    assert obs.shape == (2,) and act.shape == (1,)
    given = PPOConfig().environment(
        "CartPole-v1", observation_space=gym.spaces.Box(-1, 1, (7,)), action_space=gym.spaces.Discrete(3)
    )
    assert v.env_spaces(given) == (gym.spaces.Box(-1, 1, (7,)), gym.spaces.Discrete(3))  # the config's win
    assert v.env_spaces(PPOConfig()) is None  # no env: nothing to check


def test_env_that_cannot_be_created_is_named():
    config = PPOConfig().environment(VAR_ENV, env_config={"min_len": 0})
    with pytest.raises(ValueError, match=f"PPO: cannot create env '{VAR_ENV}': ValueError: .*min_len"):
        v.env_spaces(config)


def test_check_vector_spaces_names_the_env_and_the_space():
    config = PPOConfig().environment("CartPole-v1")
    box, image = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(0, 255, (8, 8, 3))
    v.check_vector_spaces(config, (box, gym.spaces.Discrete(2)), [v.DISCRETE])
    v.check_vector_spaces(config, (box, gym.spaces.Box(-1, 1, (2,))), [v.DISCRETE, v.CONTINUOUS])
    v.check_vector_spaces(config, None, [v.DISCRETE])  # nothing to check
    with pytest.raises(ValueError, match="PPO needs a 1-d Box observation space.*'CartPole-v1'"):
        v.check_vector_spaces(config, (image, gym.spaces.Discrete(2)), [v.DISCRETE])
    with pytest.raises(
        ValueError, match=r"needs a continuous \(1-d Box\) action space; env 'CartPole-v1' has Discrete"
    ):
        v.check_vector_spaces(config, (box, gym.spaces.Discrete(2)), [v.CONTINUOUS])
    with pytest.raises(ValueError, match="needs a Discrete action space"):
        v.check_vector_spaces(config, (box, gym.spaces.Box(-1, 1, (2,))), [v.DISCRETE])


def test_default_module_is_built_on_the_driver_and_a_space_it_cannot_take_is_named():
    config = PPOConfig().environment("CartPole-v1")
    v.check_default_module_builds(config, v.env_spaces(config))
    v.check_default_module_builds(config, None)
    with pytest.raises(ValueError, match=r"PPO cannot take env 'CartPole-v1' \(observation space Text"):
        v.check_default_module_builds(config, (gym.spaces.Text(5), gym.spaces.Discrete(2)))


def _policies(config, env, ids=("p0", "p1")):
    return config.environment(env, env_config={"num_agents": len(ids)}).multi_agent(
        policies=set(ids), policy_mapping_fn=lambda agent_id, episode, **kwargs: ids[agent_id]
    )


def test_module_spaces_of_one_agent_and_of_several_policies():
    spaces = v.module_spaces(PPOConfig().environment("CartPole-v1"))
    assert list(spaces) == [DEFAULT_MODULE_ID] and spaces[DEFAULT_MODULE_ID][1] == gym.spaces.Discrete(2)
    spaces = v.module_spaces(_policies(PPOConfig(), MultiAgentCartPole))
    assert sorted(spaces) == ["p0", "p1"]
    assert all(obs.shape == (4,) and act == gym.spaces.Discrete(2) for obs, act in spaces.values())
    spaces = v.module_spaces(_policies(PPOConfig(), MultiAgentPendulum))
    assert all(act.shape == (1,) for _, act in spaces.values())
    assert v.module_spaces(PPOConfig()) is None  # no env: nothing to check


def test_module_spaces_name_a_multi_agent_env_without_policies_and_policies_without_one():
    with pytest.raises(ValueError, match="PPO: env .* is a MultiAgentEnv: name its policies"):
        v.module_spaces(PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2}))
    with pytest.raises(ValueError, match=r"`policies` \['p0', 'p1'\] name a multi-agent setup, but env 'CartPole-v1'"):
        v.module_spaces(
            PPOConfig()
            .environment("CartPole-v1")
            .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda *a, **k: "p0")
        )


def test_default_modules_of_several_policies_are_built_and_a_module_that_cannot_be_is_named():
    config = _policies(PPOConfig(), MultiAgentCartPole)
    spaces = v.module_spaces(config)
    v.check_default_module_builds(config, spaces)
    spaces["p1"] = (gym.spaces.Text(5), gym.spaces.Discrete(2))
    with pytest.raises(ValueError, match=r"PPO cannot take env .* \(module 'p1': observation space Text"):
        v.check_default_module_builds(config, spaces)


def test_unused_settings_are_refused_off_the_config_classes_defaults_naming_each_and_what_instead():
    unused = {"gamma": "use X", "env_to_module_connector": "use Y", "train_batch_size": "use Z"}
    v.check_unused_settings(PPOConfig(), unused)  # every setting at its default
    v.check_unused_settings(PPOConfig().training(gamma=0.99), unused)  # a default, given: accepted
    config = PPOConfig().training(gamma=0.9).env_runners(env_to_module_connector=len)
    with pytest.raises(ValueError) as info:
        v.check_unused_settings(config, unused)
    assert str(info.value).splitlines()[0] == (
        "`gamma` = 0.9 has no effect in PPO (default 0.99): use X; `env_to_module_connector` = <built-in function "
        "len> has no effect in PPO (default None): use Y"
    )
    # RLlib derives train_batch_size_per_learner from train_batch_size when it is None: read then.
    v.check_unused_settings(PPOConfig().training(train_batch_size=64, train_batch_size_per_learner=None), unused)
    with pytest.raises(ValueError, match="`train_batch_size` = 64 has no effect"):
        v.check_unused_settings(PPOConfig().training(train_batch_size=64, train_batch_size_per_learner=32), unused)
    with pytest.raises(ValueError, match="`train_batch_size` = 64 has no effect"):  # both unread
        v.check_unused_settings(
            PPOConfig().training(train_batch_size=64), {**unused, "train_batch_size_per_learner": ""}
        )


def test_changed_model_config_compares_with_rllibs_defaults_not_with_was_one_given():
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    assert v.changed_model_config(PPOConfig()) == {}
    given = DefaultModelConfig(fcnet_activation="relu", fcnet_kernel_initializer="orthogonal_")
    config = PPOConfig().rl_module(model_config=given)
    assert v.changed_model_config(config) == {"fcnet_activation": "relu", "fcnet_kernel_initializer": "orthogonal_"}
    config = PPOConfig().rl_module(model_config={"fcnet_hiddens": (256, 256), "use_lstm": False, "own_key": 1})
    assert v.changed_model_config(config) == {"own_key": 1}  # RLlib's defaults (a tuple too) are not settings
    v.check_model_config_keys(config, ("own_key",), "an MLP")
    with pytest.raises(ValueError, match=r"PPO does not read model_config own_key=1: an MLP"):
        v.check_model_config_keys(config, (), "an MLP")


def test_a_user_module_class_must_have_the_learners_required_apis():
    """IMPACT_EXT's learner declares TargetNetworkAPI and ValueFunctionAPI (RLlib checks them
    only when the learner builds the module); the default module class is not a user's."""
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.lstm_containing_rlm import LSTMContainingRLModule

    config = IMPACTConfig().environment("CartPole-v1")
    assert v.user_module_classes(config) == {}
    default = config.get_default_rl_module_spec().module_class
    config.rl_module(rl_module_spec=RLModuleSpec(module_class=default))
    assert v.user_module_classes(config) == {}
    v.check_user_module(config)
    config.rl_module(
        rl_module_spec=MultiRLModuleSpec(rl_module_specs={"p0": RLModuleSpec(module_class=LSTMContainingRLModule)})
    )
    assert v.user_module_classes(config) == {"p0": LSTMContainingRLModule}
    with pytest.raises(ValueError, match=r"module class LSTMContainingRLModule of `rl_module_spec` \(module 'p0'\)"):
        v.check_user_module(config)

    class OtherBase:
        """A base the caller names (the black-box policy, TD3's networks ...)."""

    ppo = PPOConfig().rl_module(rl_module_spec=RLModuleSpec(module_class=LSTMContainingRLModule))
    v.check_user_module(ppo)  # PPO's learner needs a value function only: it has one
    with pytest.raises(ValueError, match=r"needs a subclass of OtherBase"):
        v.check_user_module(ppo, OtherBase)


def test_env_spaces_say_that_multi_agent_is_not_supported():
    """Before: "needs a 1-d Box observation space; env ... has None" (a MultiAgentEnv has no single space)."""
    from ray.tune.registry import register_env

    for env in (MultiAgentPendulum, "rllib_ext_test/MultiAgentPendulum"):
        register_env("rllib_ext_test/MultiAgentPendulum", lambda cfg: MultiAgentPendulum(cfg))
        config = PPOConfig().environment(env, env_config={"num_agents": 2})
        with pytest.raises(
            ValueError, match=r"PPO does not support multi-agent training \(env .* is a MultiAgentEnv\)"
        ):
            v.env_spaces(config)
    with pytest.raises(ValueError, match=r"names policies \['p0', 'p1'\]"):
        v.env_spaces(_policies(PPOConfig(), "CartPole-v1"))


def test_env_runner_callbacks_are_refused_where_no_env_runner_calls_them():
    from ray.rllib.callbacks.callbacks import RLlibCallback

    class TrainOnly(RLlibCallback):
        def on_train_result(self, **kwargs):
            pass

    class PerEpisode(TrainOnly):
        def on_episode_step(self, **kwargs):
            pass

    v.check_env_runner_callbacks(PPOConfig(), "lean runners")
    v.check_env_runner_callbacks(PPOConfig().callbacks(TrainOnly), "lean runners")  # algorithm-level: runs
    with pytest.raises(ValueError, match=r"PPO: PerEpisode.on_episode_step would never run: lean runners call none"):
        v.check_env_runner_callbacks(PPOConfig().callbacks([TrainOnly, PerEpisode]), "lean runners")
    with pytest.raises(ValueError, match=r"PPO: callbacks_on_episode_end would never run"):
        v.check_env_runner_callbacks(PPOConfig().callbacks(on_episode_end=lambda **kw: None), "lean runners")
