"""TD3's settings group, defined once: TD3_EXT's defaults, and the changes the ERL family makes.

TD3_EXT (``TD3Config``) and the ERL family's critic and RL individuals (``ERLConfig``: AESRL_EXT,
CEMRL_EXT) read the same TD3 settings. :data:`TD3_SETTINGS` holds them with TD3_EXT's defaults
(Fujimoto et al. 2018; paper 001 App. A/C); :data:`ERL_TD3_CHANGES` holds, each with its reason
and source, the defaults the ERL family sets otherwise. The minibatch size is not in the group:
TD3_EXT's is RLlib's ``train_batch_size_per_learner`` (100, CEM-RL's), ERL's is ``rl_batch_size``
(256, the reference configs').
"""

from __future__ import annotations

from rllib_ext.settings import Setting, changed

TD3_SETTINGS: dict[str, Setting] = {
    "actor_lr": Setting(
        1e-3,
        float,
        gt=0,
        source="1e-3 (CEM-RL/TD3)",
        doc="Adam learning rate of the actor (`lr` is not used)",
    ),
    "critic_lr": Setting(1e-3, float, gt=0, source="1e-3 (CEM-RL/TD3)", doc="Adam learning rate of the twin critics"),
    "gamma": Setting(0.99, float, ge=0, le=1, rllib=True, symbol="γ", source="0.99", doc="discount"),
    "tau": Setting(0.005, float, gt=0, le=1, symbol="τ", source="0.005", doc="soft target updates θ' ← τθ + (1 − τ)θ'"),
    "policy_noise": Setting(
        0.2, float, ge=0, symbol="σ", source="0.2 (TD3)", doc="target smoothing noise, in action half-ranges"
    ),
    "noise_clip": Setting(0.5, float, ge=0, symbol="c", source="0.5 (TD3)", doc="clip of that noise, in half-ranges"),
    "policy_delay": Setting(
        2, int, ge=1, symbol="d", source="2 (TD3)", doc="critic updates per actor and target update"
    ),
    "action_noise": Setting(
        0.1,
        float,
        ge=0,
        symbol="a_noise",
        source="0.1 (App. C.2)",
        doc="Gaussian exploration noise, in half-ranges",
    ),
    "initial_steps": Setting(
        10_000,
        int,
        ge=0,
        source="10000 (TD3 start_timesteps)",
        doc="lifetime env steps of uniform random actions before acting and updating",
    ),
    "replay_capacity": Setting(1_000_000, int, ge=1, source="200000 (App. C.1)", doc="FIFO transitions kept"),
    "checkpoint_replay": Setting(False, bool, doc="whether checkpoints include the replay contents"),
    "optimizer": Setting(
        "adam",
        str,
        source="Adam",
        doc="optimizer of the TD3 networks, by name in `rllib_ext.optim`; Adam is torch's fused implementation "
        "unless `optimizer_kwargs` names `fused` or `foreach`",
    ),
    "optimizer_kwargs": Setting({}, dict, doc="passed to the optimizer"),
}

#: The ERL family's changes to :data:`TD3_SETTINGS`, each with its reason and source.
ERL_TD3_CHANGES = {
    # The actors train in their own jobs against a fixed critic, so TD3's delay acts only on the
    # target critic: every step, as apourchot/CEM-RL's Critic.update and aes-rl's critic-only calls.
    "policy_delay": changed(
        default=1,
        symbol="—",
        source="reference: every step (TD3: 2)",
        doc="the target critic's soft-update period, in critic steps (the actors train in their own jobs, "
        "so TD3's delay acts only here)",
    ),
    # Paper 001 App. C.1 (TD3_EXT keeps TD3's 1e6).
    "replay_capacity": changed(default=200_000, source="2e5 (App. C.1)", doc="replay actor size"),
    # The reference codes evaluate individuals and μ without noise (aes-rl `rollout(noise=False)`,
    # apourchot `es_grad.py` `noise=None`); App. C.2's 0.1 is `action_noise=0.1`.
    "action_noise": changed(
        default=0.0,
        source="0.1 (App. C.2); reference 0",
        doc="Gaussian action noise of every fitness evaluation, f(z) and f(μ) alike",
    ),
    # The ERL configs have always taken a number here (compared with the env-step count).
    "initial_steps": changed(kind=float, source="—", doc="env steps of uniform random-action individuals"),
    "checkpoint_replay": changed(doc="checkpoints include the replay contents"),
    "optimizer": changed(doc="TD3 optimizer of critic and RL individuals"),
    "actor_lr": changed(source="1e-3", doc="Adam learning rate of the RL individuals"),
    "critic_lr": changed(source="1e-3", doc="Adam learning rate of the critic"),
    "gamma": changed(source="—", doc="TD3"),
}
