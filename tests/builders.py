"""Small, seeded algorithm configs that several test files build alike.

The tiers of one algorithm's tests (``tests/{unit,smoke,reliability,learning}/algorithms/NAME/``), and
the tests of a part it shares with others (``tests/smoke/common/``), start from the same small config
and override what their test is about, so the sizes are set once, here.
"""

from __future__ import annotations

from rllib_ext import ARSConfig, CVESConfig, ESConfig
from rllib_ext.algorithms.aesrl.aesrl import AESRLConfig
from rllib_ext.algorithms.dfd.dfd import DFDConfig

VAR_ENV = "rllib_ext/VariableLength-v0"


def small_es_config(env=VAR_ENV, env_config=None, runners=1, **training):
    """ES_EXT, 8 episodes a batch, an 8-unit policy; episodes of 5-15 steps unless ``env_config``."""
    training = {"episodes_per_batch": 8, "policy_hiddens": [8], **training}
    return (
        ESConfig()
        .environment(env, env_config={"min_len": 5, "max_len": 15} if env_config is None else env_config)
        .env_runners(num_env_runners=runners)
        .training(**training)
        .debugging(seed=0)
        .reporting(min_time_s_per_iteration=None)  # one update per train() call in these tests
    )


def small_ars_config(runners=1, env_config=None, **training):
    """ARS_EXT, 4 directions (8 episodes) a batch, the top 2 used, linear policy, on the continuous
    variable-length env (episodes of 5-15 steps)."""
    training = {"num_directions": 4, "top_directions": 2, **training}
    return (
        ARSConfig()
        .environment(VAR_ENV, env_config=env_config or {"continuous": True, "min_len": 5, "max_len": 15})
        .env_runners(num_env_runners=runners)
        .training(**training)
        .debugging(seed=0)
        .reporting(min_time_s_per_iteration=None)  # one update per train() call in these tests
    )


def small_cves_config(runners=2, env_config=None, **training):
    """CVES_EXT, an 8-unit policy, on the continuous variable-length env (episodes of 5-15 steps)."""
    training = {"policy_hiddens": [8], **training}
    return (
        CVESConfig()
        .environment(VAR_ENV, env_config=env_config or {"continuous": True, "min_len": 5, "max_len": 15})
        .env_runners(num_env_runners=runners)
        .training(**training)
        .debugging(seed=0)
    )


def small_dfd_config(**training):
    """DFD_EXT, 8 episodes a batch, an 8-unit policy, two runners; episodes of 10-30 steps."""
    training = {"episodes_per_batch": 8, "policy_hiddens": [8], "noise_stdev": 0.1, **training}
    return (
        DFDConfig()
        .environment(VAR_ENV, env_config={"min_len": 10, "max_len": 30})
        .env_runners(num_env_runners=2)
        .training(**training)
        .debugging(seed=0)
        .reporting(min_time_s_per_iteration=None)  # one update per train() call in these tests
    )


# ERL family (AES-RL, CEM-RL) on Pendulum-v1. Actor and critics of different sizes on purpose
# (the critic worker holds both).
TINY_ERL = dict(
    policy_hiddens=[16, 16], critic_hiddens=[24, 24], rl_batch_size=32, rl_actor_steps=20, initial_steps=400
)


def small_aesrl_config(**training):
    """AESRL_EXT with :data:`TINY_ERL` networks, two runners, fixed AES-RL range and baseline."""
    settings = dict(TINY_ERL, critic_steps_per_call=50, fixed_range=200.0, fitness_baseline=200.0, mean_eval_episodes=1)
    settings.update(training)
    return (
        AESRLConfig()
        .environment("Pendulum-v1")
        .env_runners(num_env_runners=2)
        .training(**settings)
        .reporting(min_time_s_per_iteration=None)
        .debugging(seed=0)
    )


def small_refer_learner(config_cls, obs_dim=3, act_dim=2, **training):
    """A built paper-003 learner (VRACER_EXT, DDPG_EXT or NAF_EXT) in this process, without Ray.

    ``config_cls`` is ``VRACERConfig``, ``DDPGConfig`` or ``NAFConfig``; the spaces are Box(-1, 1)
    of ``obs_dim`` and ``act_dim``; N_start 1, N 1000, B 8, the eager step (``compile_update`` False: a
    compile costs 10-40 s) unless ``training`` says otherwise.
    RLlib's ``AlgorithmConfig.build_learner`` builds the RLModule, the optimizers, the target
    networks and the replay memory, and starts no Ray.
    """
    import gymnasium as gym
    from ray.rllib.core import DEFAULT_MODULE_ID

    training = {
        "n_start": 1,
        "replay_capacity": 1000,
        "train_batch_size_per_learner": 8,
        "compile_update": False,
        **training,
    }
    spaces = {DEFAULT_MODULE_ID: (gym.spaces.Box(-1, 1, (obs_dim,)), gym.spaces.Box(-1, 1, (act_dim,)))}
    return config_cls().training(**training).debugging(seed=0).build_learner(spaces=spaces)


def refer_loss_gradients(learner, batch, beta=None):
    """(loss, {parameter name: gradient}) of one evaluation of the learner's loss on ``batch``.

    Runs the module's ``forward_train`` and the learner's ``compute_loss_for_module`` as
    ``Learner.update`` does, with β of Eq. (10) set to ``beta`` when given; no optimizer step.
    A parameter the loss does not reach gets a zero gradient.
    """
    import torch
    from ray.rllib.core import DEFAULT_MODULE_ID

    if beta is not None:
        learner.refer.beta = beta
    module = learner.module[DEFAULT_MODULE_ID]
    module.zero_grad(set_to_none=True)
    loss = learner.compute_loss_for_module(
        module_id=DEFAULT_MODULE_ID,
        config=learner.config.get_config_for_module(DEFAULT_MODULE_ID),
        batch=batch,
        fwd_out=module.forward_train(batch),
    )
    loss.backward()
    grads = {n: (torch.zeros_like(p) if p.grad is None else p.grad.clone()) for n, p in module.named_parameters()}
    return loss.detach(), grads
