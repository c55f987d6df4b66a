"""IMPACTConfig: validate() rejects bad hyperparameters and accepts the ablations, every optimizer
name, several learners, a GPU per learner and several policies; the driver's split of train
batches among several learners."""

from __future__ import annotations

import collections

import pytest
from ray.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole
from ray.rllib.utils.metrics import ALL_MODULES, LEARNER_RESULTS
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from rllib_ext.algorithms.impact.impact import (
    DRIVER_DROPPED_KEY,
    HELD_BACK_KEY,
    IGNORED_SETTINGS,
    IMPACT,
    IMPACTConfig,
)
from rllib_ext.common.guards import FiniteMultiAgentEnvRunner, FiniteSingleAgentEnvRunner


@pytest.mark.parametrize(
    "overrides,match",
    [
        ({"target_worker_clipping": 0.5}, "target_worker_clipping"),
        ({"target_worker_clipping": 0.0}, "target_worker_clipping"),
        ({"target_worker_clipping": -2.0}, "target_worker_clipping"),
        ({"circular_buffer_iterations_per_batch": 0}, "circular_buffer_iterations_per_batch"),
        ({"circular_buffer_num_batches": 0}, "circular_buffer_num_batches"),
        ({"surrogate_ratio": "r7"}, "surrogate_ratio"),
        ({"optimizer": "adagrad-ish"}, "optimizer"),
        ({"target_network_update_freq": 0}, "target_network_update_freq"),
        ({"broadcast_interval": 0}, "broadcast_interval"),
        ({"lambda_": 1.5}, "lambda_"),
        ({"clip_param": 0.0}, "clip_param"),
        ({"standardize_advantages": "yes"}, "standardize_advantages"),
        ({"value_target": "td0"}, "value_target"),
        ({"vtrace_clip_c_threshold": 0.0}, "vtrace_clip_c_threshold"),
        ({"vtrace_clip_rho_threshold": -1.0}, "vtrace_clip_rho_threshold"),
        # §4.1.1: "when n = 1~4, the agent does not learn" (an APPO-style value of 2).
        ({"target_network_update_freq": 2}, "target_network_update_freq.*does not learn"),
        ({"target_network_update_freq": 4}, "target_network_update_freq.*force_target_network_update_freq"),
        ({"force_target_network_update_freq": "yes"}, "force_target_network_update_freq"),
    ],
)
def test_validate_rejects_bad_hyperparameters(overrides, match):
    config = IMPACTConfig().environment("CartPole-v1").training(**overrides)
    with pytest.raises(ValueError, match=match):
        config.validate()


def test_validate_accepts_defaults_and_ablations():
    for ratio in ("r1", "r2", "r3"):
        IMPACTConfig().environment("CartPole-v1").training(surrogate_ratio=ratio).validate()
    assert IMPACTConfig().standardize_advantages is False  # the paper
    IMPACTConfig().environment("CartPole-v1").training(standardize_advantages=True).validate()
    config = IMPACTConfig()
    assert config.target_update_interval == 4 * 2  # n = N·K (§4.1.1)
    assert config.copy().training(target_network_update_freq=3).target_update_interval == 3


def test_target_period_in_the_non_learning_range_only_when_forced():
    """n = 1..4 learner updates is rejected unless forced; 5 and the default N·K pass."""
    base = IMPACTConfig().environment("CartPole-v1")
    base.copy().training(target_network_update_freq=5).validate()
    base.copy().training(circular_buffer_num_batches=1, circular_buffer_iterations_per_batch=2).validate()
    forced = base.copy().training(target_network_update_freq=1, force_target_network_update_freq=True)
    forced.validate()
    assert forced.target_update_interval == 1


@pytest.mark.parametrize(
    "setting,value,hint",
    [
        ("num_epochs", 4, "circular_buffer_iterations_per_batch"),
        ("minibatch_size", 100, "train_batch_size_per_learner"),
        ("shuffle_batch_per_epoch", True, "num_epochs"),
        ("train_batch_size", 5000, "train_batch_size_per_learner"),
        ("use_gae", False, "V-trace GAE"),
        ("vtrace_clip_pg_rho_threshold", 2.0, "vtrace_clip_rho_threshold"),
        ("simple_queue_size", 8, "circular buffer"),
        ("num_gpu_loader_threads", 2, "no GPU loader"),
        ("opt_type", "rmsprop", "optimizer"),
        ("momentum", 0.9, "optimizer_kwargs"),
    ],
)
def test_validate_rejects_inherited_settings_impact_ignores(setting, value, hint):
    """One error naming the setting, its value and what to use instead; the default passes."""
    IMPACTConfig().environment("CartPole-v1").validate()
    config = IMPACTConfig().environment("CartPole-v1")
    setattr(config, setting, value)  # as update_from_dict / the CLI's --config would
    with pytest.raises(ValueError) as info:
        config.validate()
    message = str(info.value)
    assert f"`{setting}`" in message and repr(value) in message and "no effect" in message, message
    assert hint in message, message


def _other_value(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    return 7 if value is None else "other"


@pytest.mark.parametrize("setting", sorted(IGNORED_SETTINGS))
def test_every_ignored_setting_is_rejected_off_its_default(setting):
    config = IMPACTConfig().environment("CartPole-v1")
    setattr(config, setting, _other_value(getattr(config, setting)))
    with pytest.raises(ValueError, match=f"`{setting}` = .* has no effect in IMPACT_EXT"):
        config.validate()


def test_train_batch_size_is_accepted_when_it_is_m():
    """With `train_batch_size_per_learner=None`, RLlib derives M from `train_batch_size`: not ignored."""
    config = IMPACTConfig().environment("CartPole-v1").training(train_batch_size_per_learner=None, train_batch_size=200)
    config.validate()
    assert config.train_batch_size_per_learner == 200


def test_a_user_module_without_a_target_network_is_refused_at_validate():
    """RLlib's custom LSTM module (examples/rl_modules/classes) has a value function but no target
    network: refused by validate(), not inside the learner thread ("no attribute 'forward_target'")."""
    from ray.rllib.algorithms.appo.torch.default_appo_torch_rl_module import DefaultAPPOTorchRLModule
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.lstm_containing_rlm import LSTMContainingRLModule

    config = IMPACTConfig().environment("CartPole-v1")
    config.rl_module(rl_module_spec=RLModuleSpec(module_class=LSTMContainingRLModule))
    with pytest.raises(ValueError, match=r"LSTMContainingRLModule .*TargetNetworkAPI \(forward_target"):
        config.validate()

    class OwnAPPOModule(DefaultAPPOTorchRLModule):
        pass

    config.rl_module(rl_module_spec=RLModuleSpec(module_class=OwnAPPOModule))
    config.validate()  # has both APIs: accepted


def test_every_registered_optimizer_name_validates_and_others_fail():
    from rllib_ext.optim import OPTIMIZERS

    for name in OPTIMIZERS:
        IMPACTConfig().environment("CartPole-v1").training(optimizer=name.upper()).validate()
    with pytest.raises(ValueError, match="optimizer.*'adamw'"):
        IMPACTConfig().environment("CartPole-v1").training(optimizer="adamw").validate()
    with pytest.raises(ValueError, match="optimizer_kwargs"):
        IMPACTConfig().environment("CartPole-v1").training(optimizer_kwargs=[0.9]).validate()


def test_atari_env_without_ale_py_is_one_clear_error_before_any_actor(monkeypatch):
    """configs/impact_atari.yaml's env without the `atari` extra: validate() names ale-py."""
    import sys

    monkeypatch.setitem(sys.modules, "ale_py", None)  # as if ale-py were not installed
    config = IMPACTConfig().environment("rllib_ext/Atari42-v0", env_config={"game": "ALE/Pong-v5"})
    with pytest.raises(ValueError, match=r"cannot create env 'rllib_ext/Atari42-v0'.*ale-py.*\[atari\]"):
        config.validate()


def _two_policies(config):
    return config.environment(MultiAgentCartPole, env_config={"num_agents": 2}).multi_agent(
        policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, episode, **kwargs: f"p{agent_id}"
    )


def test_several_learners_a_gpu_per_learner_and_several_policies_validate():
    IMPACTConfig().environment("CartPole-v1").learners(num_learners=2).validate()
    for learner_thread in (True, False):
        IMPACTConfig().environment("CartPole-v1").learners(num_learners=4).training(
            learner_thread=learner_thread
        ).validate()
    config = IMPACTConfig().environment("CartPole-v1").learners(num_learners=1, num_gpus_per_learner=1)
    config.validate()  # the paper's one learner on one GPU (§4.3); the GPU is needed at build time
    config = _two_policies(IMPACTConfig())
    assert config.env_runner_cls is FiniteSingleAgentEnvRunner
    config.validate()
    assert config.env_runner_cls is FiniteMultiAgentEnvRunner  # RLlib's runner, with the NaN/inf guard
    _two_policies(IMPACTConfig()).learners(num_learners=2).validate()


def test_a_multi_agent_env_without_policies_and_policies_without_one_are_named():
    config = IMPACTConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
    with pytest.raises(ValueError, match=r"is a MultiAgentEnv: .*config.multi_agent\(policies=..., policy_mapping_fn"):
        config.validate()
    config = (
        IMPACTConfig()
        .environment("CartPole-v1")
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda *a, **k: "p0")
    )
    with pytest.raises(ValueError, match=r"`policies` \['p0', 'p1'\] .* env 'CartPole-v1' is not a MultiAgentEnv"):
        config.validate()


class _Driver:
    """The driver state IMPACT._impact_shares reads and writes (no Ray, no actors)."""

    _impact_shares = IMPACT._impact_shares

    def __init__(self, num_learners, queue_size):
        self.config = IMPACTConfig().learners(num_learners=num_learners).training(circular_buffer_queue_size=queue_size)
        self._impact_pending = collections.deque()
        self._impact_learner_waiting = 0
        self._impact_fragment_steps = {}
        self.metrics = MetricsLogger()

    def peek(self, key):
        return self.metrics.peek((LEARNER_RESULTS, ALL_MODULES, key))


def test_one_learner_takes_every_train_batch():
    driver = _Driver(num_learners=1, queue_size=2)
    assert driver._impact_shares(["a", "b", "c"]) == [["a", "b", "c"]]
    assert not driver._impact_pending


def test_several_learners_get_equal_shares_within_their_wait_queues_and_the_rest_waits_or_is_counted():
    """(a) of issue 21's several-learner item: the same number of train batches per learner and
    call, never more than a wait queue takes (so no learner drops by timing), the remainder held
    back for the next call, the oldest dropped here once every queue is full, each one counted."""
    driver = _Driver(num_learners=2, queue_size=2)
    handed = []

    def call(new, learners_waiting):
        driver._impact_learner_waiting = learners_waiting  # what the last impact_update reported
        shares = driver._impact_shares(new)
        assert len({len(share) for share in shares}) == 1  # equal shares
        assert all(learners_waiting + len(share) <= 2 for share in shares)  # within the wait queue
        handed.extend(item for share in shares for item in share)
        return shares

    assert call(["p0", "p1", "p2", "p3", "p4"], 0) == [["p0", "p1"], ["p2", "p3"]]
    assert driver.peek(HELD_BACK_KEY) == 1  # "p4": an uneven remainder waits for the next call
    assert call(["p5", "p6"], 2) == [[], []]  # the learners' queues are full: nothing goes out
    assert driver.peek(HELD_BACK_KEY) == 3
    assert call(["p7", "p8", "p9"], 2) == [[], []]  # 6 > 2 learners x 2: the two oldest are dropped
    assert driver.peek(HELD_BACK_KEY) == 4 and driver.peek(DRIVER_DROPPED_KEY) == 2
    assert call([], 1) == [["p6"], ["p7"]]  # room for one each
    assert call(["p10"], 0) == [["p8"], ["p9"]] and driver.peek(HELD_BACK_KEY) == 1
    # None lost silently: every train batch was handed out once, dropped (counted) or still waits.
    assert sorted(handed + ["p4", "p5"] + list(driver._impact_pending)) == sorted(f"p{i}" for i in range(11))
    assert len(set(handed)) == len(handed)
