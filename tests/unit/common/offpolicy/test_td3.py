"""The TD3 update on hand-made batches: target smoothing, clipped double Q, delays, soft updates."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rllib_ext.common.offpolicy.target_networks import soft_update
from rllib_ext.common.offpolicy.td3 import BATCH_KEYS, TD3Updater, TwinCritic, td3_actor_loss, td3_critic_loss
from rllib_ext.common.policies import MLPPolicy

LOW, HIGH = np.array([-1.0, 0.0], np.float32), np.array([3.0, 1.0], np.float32)  # half (2, 0.5)


SPACE = gym.spaces.Box(LOW, HIGH, dtype=np.float32)


class SumTwin(nn.Module):
    """Q1(s, a) = Σa, Q2(s, a) = Σa + offset: min(Q1, Q2) = Σa for offset > 0."""

    def __init__(self, offset: float = 10.0):
        super().__init__()
        self.offset = offset

    def forward(self, obs, act):
        return act.sum(-1), act.sum(-1) + self.offset


def _constant_actor(out_bias) -> MLPPolicy:
    """An actor whose pre-tanh output is ``out_bias`` for every state."""
    actor = MLPPolicy(3, SPACE, hiddens=(4,), activation="tanh")
    with torch.no_grad():
        for p in actor.parameters():
            p.zero_()
        actor.net[-1].bias.copy_(torch.as_tensor(out_bias, dtype=torch.float32))
    return actor


def _batch(n=64, terminated=0.0, seed=0):
    g = np.random.default_rng(seed)
    return {
        "obs": torch.as_tensor(g.normal(size=(n, 3)), dtype=torch.float32),
        "actions": torch.as_tensor(g.uniform(LOW, HIGH, size=(n, 2)), dtype=torch.float32),
        "rewards": torch.as_tensor(g.normal(size=n), dtype=torch.float32),
        "next_obs": torch.as_tensor(g.normal(size=(n, 3)), dtype=torch.float32),
        "terminateds": torch.full((n,), float(terminated)),
    }


def _smoothed_target_action(actor_target, next_obs, policy_noise, noise_clip, seed):
    """Hand computation of TD3's smoothed target action with the same ε as the loss."""
    eps = torch.randn((next_obs.shape[0], 2), generator=torch.Generator().manual_seed(seed)).numpy()
    half, center = (HIGH - LOW) / 2, (HIGH + LOW) / 2
    a = actor_target.deterministic_action(next_obs).detach().numpy()
    noise = np.clip(eps * policy_noise * half, -noise_clip * half, noise_clip * half)
    return np.clip(a + noise, center - half, center + half), eps


@pytest.mark.parametrize("out_bias", [[0.0, 0.0], [5.0, -5.0]])  # centre; at the bounds (high, low)
def test_target_smoothing_against_hand_computation(out_bias):
    actor_target = _constant_actor(out_bias)
    batch = _batch()
    policy_noise, noise_clip, gamma = 0.4, 0.5, 0.9  # σ = 0.4 half-ranges: clip at 0.5 is often active
    expected_a, eps = _smoothed_target_action(actor_target, batch["next_obs"], policy_noise, noise_clip, seed=7)
    assert (np.abs(eps * policy_noise) > noise_clip).any()  # the noise clip is exercised
    expected_y = batch["rewards"].numpy() + gamma * expected_a.sum(-1)
    critic = SumTwin(offset=1.0)
    loss, stats = td3_critic_loss(
        critic,
        SumTwin(),
        actor_target,
        batch,
        gamma=gamma,
        policy_noise=policy_noise,
        noise_clip=noise_clip,
        generator=torch.Generator().manual_seed(7),
    )
    q = batch["actions"].numpy().sum(-1)
    expected_loss = np.mean((q - expected_y) ** 2) + np.mean((q + 1.0 - expected_y) ** 2)
    assert stats["target_q_mean"] == pytest.approx(expected_y.mean(), rel=1e-5, abs=1e-5)
    assert float(loss) == pytest.approx(expected_loss, rel=1e-5)
    if out_bias[0] > 0:  # the target action sits at the bounds: noise beyond them is clipped
        assert np.isclose(expected_a[:, 0], HIGH[0], atol=1e-3).mean() > 0.3
        assert np.isclose(expected_a[:, 1], LOW[1], atol=1e-3).mean() > 0.3
        assert (expected_a >= LOW - 1e-6).all() and (expected_a <= HIGH + 1e-6).all()
    else:  # centred: |noise| <= noise_clip·half, and it is hit
        dev = np.abs(expected_a - (HIGH + LOW) / 2) / ((HIGH - LOW) / 2)
        assert dev.max() == pytest.approx(noise_clip, abs=1e-6)


def test_clipped_double_q_takes_the_min():
    actor_target = _constant_actor([0.0, 0.0])
    batch = _batch()
    _, stats_pos = td3_critic_loss(
        SumTwin(), SumTwin(offset=3.0), actor_target, batch, gamma=1.0, policy_noise=0.0, noise_clip=0.5
    )
    _, stats_neg = td3_critic_loss(
        SumTwin(), SumTwin(offset=-3.0), actor_target, batch, gamma=1.0, policy_noise=0.0, noise_clip=0.5
    )
    centre_sum = float(((HIGH + LOW) / 2).sum())
    r = float(batch["rewards"].mean())
    assert stats_pos["target_q_mean"] == pytest.approx(r + centre_sum, abs=1e-5)
    assert stats_neg["target_q_mean"] == pytest.approx(r + centre_sum - 3.0, abs=1e-5)


def test_terminal_transitions_do_not_bootstrap():
    batch = _batch(terminated=1.0)
    _, stats = td3_critic_loss(
        SumTwin(), SumTwin(), _constant_actor([1.0, 1.0]), batch, gamma=0.99, policy_noise=0.2, noise_clip=0.5
    )
    assert stats["target_q_mean"] == pytest.approx(float(batch["rewards"].mean()), abs=1e-6)
    mixed = _batch()
    mixed["terminateds"][::2] = 1.0
    critic = TwinCritic(3, 2, hiddens=(8,))
    loss, _ = td3_critic_loss(
        critic, SumTwin(), _constant_actor([0.0, 0.0]), mixed, gamma=0.5, policy_noise=0.0, noise_clip=0.5
    )
    q1, q2 = critic(mixed["obs"], mixed["actions"])
    y = mixed["rewards"] + 0.5 * (1 - mixed["terminateds"]) * float(((HIGH + LOW) / 2).sum())
    assert float(loss.detach()) == pytest.approx(
        float(((q1.detach() - y) ** 2).mean() + ((q2.detach() - y) ** 2).mean()), rel=1e-5
    )


def test_twin_critic_shapes_and_independence():
    critic = TwinCritic(3, 2)
    assert [m.out_features for m in critic.q1_net if isinstance(m, nn.Linear)] == [400, 300, 1]
    assert any(isinstance(m, nn.LeakyReLU) for m in critic.q1_net)
    q1, q2 = critic(torch.zeros(5, 3), torch.zeros(5, 2))
    assert q1.shape == q2.shape == (5,)
    assert torch.equal(critic.q1(torch.zeros(5, 3), torch.zeros(5, 2)), q1)
    assert not torch.equal(q1, q2)  # separately initialized


def test_actor_loss_is_minus_q1():
    actor, critic, obs = MLPPolicy(3, SPACE), TwinCritic(3, 2, hiddens=(8,)), torch.randn(6, 3)
    expected = -critic.q1(obs, actor.deterministic_action(obs)).mean()
    assert float(td3_actor_loss(actor, critic, obs).detach()) == pytest.approx(float(expected.detach()))


def test_soft_update_formula():
    source, target = nn.Linear(3, 2), nn.Linear(3, 2)
    before = [p.detach().clone() for p in target.parameters()]
    soft_update(target, source, 0.1)
    for t, s, b in zip(target.parameters(), source.parameters(), before, strict=False):
        torch.testing.assert_close(t, 0.1 * s + 0.9 * b)


def _params(module):
    return torch.nn.utils.parameters_to_vector(module.parameters()).detach().clone()


def test_delayed_actor_and_target_updates():
    u = TD3Updater(3, SPACE, hiddens=(16, 16), policy_delay=3, seed=0)
    batch = _batch(32)
    for call in range(1, 8):
        before = {n: _params(getattr(u, n)) for n in ("actor", "critic", "actor_target", "critic_target")}
        stats = u.update(batch)
        changed = {n: not torch.equal(before[n], _params(getattr(u, n))) for n in before}
        delayed = call % 3 == 0
        assert changed == {"actor": delayed, "critic": True, "actor_target": delayed, "critic_target": delayed}, call
        assert ("actor_loss" in stats) == delayed
    assert (u.num_updates, u.num_critic_steps, u.num_actor_steps) == (7, 7, 2)


def test_separate_steps_touch_only_their_network():
    u = TD3Updater(3, SPACE, hiddens=(16,), seed=1)
    batch = _batch(16)
    critic, actor = _params(u.critic), _params(u.actor)
    u.actor_step(batch["obs"].numpy())
    assert torch.equal(critic, _params(u.critic)) and not torch.equal(actor, _params(u.actor))
    assert all(p.grad is None for p in u.critic.parameters()) and all(p.requires_grad for p in u.critic.parameters())
    actor = _params(u.actor)
    u.critic_step({k: v.numpy() for k, v in batch.items()})
    assert torch.equal(actor, _params(u.actor)) and not torch.equal(critic, _params(u.critic))
    # Targets start equal to the trained networks and are not trainable.
    fresh = TD3Updater(3, SPACE, hiddens=(16,), seed=1)
    assert torch.equal(_params(fresh.actor), _params(fresh.actor_target))
    assert not any(p.requires_grad for p in fresh.critic_target.parameters())


def test_actor_steps_on_a_stack_equal_single_steps_and_leave_the_critic():
    """actor_steps (an RL individual's chunk: one transfer, one read of the loss) takes the same
    steps as actor_step one batch at a time, and the critic stays as it was."""
    one, many = (TD3Updater(3, SPACE, hiddens=(16,), seed=5) for _ in range(2))
    obs = np.stack([_batch(16, seed=i)["obs"].numpy() for i in range(4)])
    losses = [one.actor_step(o)["actor_loss"] for o in obs]
    critic = _params(many.critic)
    mean = many.actor_steps(obs)
    assert many.num_actor_steps == one.num_actor_steps == 4
    assert torch.equal(_params(one.actor), _params(many.actor)) and torch.equal(critic, _params(many.critic))
    assert mean["actor_loss"] == pytest.approx(np.mean(losses), rel=1e-6)
    assert all(p.grad is None and p.requires_grad for p in many.critic.parameters())
    assert many.actor_steps(obs[:0]) == {} and many.num_actor_steps == 4


def test_critic_steps_on_a_stack_equal_single_steps_with_the_target_every_d():
    """critic_steps (the ERL critic worker's loop: one transfer, one read of the statistics) takes
    the same steps as critic_step one batch at a time with a target update every d-th step."""
    one, many = (TD3Updater(3, SPACE, hiddens=(16,), seed=4) for _ in range(2))
    batches = [_batch(16, seed=i) for i in range(5)]
    stats = []
    for b in batches:
        stats.append(one.critic_step({k: v.numpy() for k, v in b.items()}))
        if one.num_critic_steps % 2 == 0:
            soft_update(one.critic_target, one.critic, one.tau)
    stacked = {k: np.stack([b[k].numpy() for b in batches]) for k in batches[0]}
    mean = many.critic_steps(stacked, target_every=2)
    assert many.num_critic_steps == one.num_critic_steps == 5
    for name in ("critic", "critic_target", "actor"):
        assert torch.equal(_params(getattr(one, name)), _params(getattr(many, name))), name
    fresh = TD3Updater(3, SPACE, hiddens=(16,), seed=4)
    assert not torch.equal(_params(many.critic_target), _params(fresh.critic_target))
    assert mean.keys() == stats[0].keys()
    for k in mean:
        assert mean[k] == pytest.approx(np.mean([s[k] for s in stats]), rel=1e-6), k
    assert many.critic_steps({k: v[:0] for k, v in stacked.items()}) == {}
    untouched = _params(many.critic_target)
    many.critic_steps(stacked)  # no target_every: the target stays
    assert torch.equal(untouched, _params(many.critic_target))


def test_updater_state_round_trip_and_seed():
    a = TD3Updater(3, SPACE, hiddens=(16,), seed=3)
    assert torch.equal(_params(a.actor), _params(TD3Updater(3, SPACE, hiddens=(16,), seed=3).actor))
    for i in range(3):
        a.update(_batch(16, seed=i))
    b = TD3Updater(3, SPACE, hiddens=(16,), seed=99)
    b.set_state(a.get_state())
    assert b.num_updates == 3 and b.num_actor_steps == 1
    for name in ("actor", "critic", "actor_target", "critic_target"):
        assert torch.equal(_params(getattr(a, name)), _params(getattr(b, name)))
    assert a.update(_batch(16, seed=5)) == b.update(_batch(16, seed=5))  # optimizer + noise states match
    assert torch.equal(_params(a.actor), _params(b.actor))


def _all_tensors_on_cpu(tree) -> bool:
    if isinstance(tree, torch.Tensor):
        return tree.device.type == "cpu"
    if isinstance(tree, dict):
        return all(_all_tensors_on_cpu(v) for v in tree.values())
    if isinstance(tree, (list, tuple)):
        return all(_all_tensors_on_cpu(v) for v in tree)
    return True


def test_updater_state_restores_across_devices_except_the_noise_stream(caplog):
    """A state saved with the noise generator on another device (a GPU critic's checkpoint restored
    on a CPU machine) restores weights, optimizers and counters, and says that the noise restarts."""
    a = TD3Updater(3, SPACE, hiddens=(16,), seed=3)
    for i in range(2):
        a.update(_batch(16, seed=i))
    state = a.get_state()
    assert state["generator_device"] == "cpu" and _all_tensors_on_cpu(state)
    state["generator_device"] = "cuda"
    b = TD3Updater(3, SPACE, hiddens=(16,), seed=99)
    before = b.generator.get_state().clone()
    with caplog.at_level("WARNING", logger="rllib_ext.common.offpolicy.td3"):
        b.set_state(state)
    assert "keeps its own seed's stream" in caplog.text
    assert torch.equal(b.generator.get_state(), before)
    assert b.num_updates == 2
    for name in ("actor", "critic", "actor_target", "critic_target"):
        assert torch.equal(_params(getattr(a, name)), _params(getattr(b, name)))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_updater_on_a_gpu_trains_there_and_saves_a_cpu_state():
    """The ERL critic worker's GPU path (critic_num_gpus): networks, targets, noise and batches on
    the GPU; set_flat keeps θ there; the saved state loads into a CPU updater with equal Q-values."""
    gpu = TD3Updater(3, SPACE, hiddens=(16,), seed=3, device="cuda")
    theta = gpu.actor.get_flat()
    gpu.actor.set_flat(theta + 0.01)
    assert all(p.device.type == "cuda" for p in gpu.actor.parameters())
    for i in range(4):
        stats = gpu.update(_batch(16, seed=i))
    assert np.isfinite(stats["critic_loss"]) and gpu.num_actor_steps == 2
    stacked = {k: np.stack([_batch(16, seed=s)[k].numpy() for s in (5, 6)]) for k in BATCH_KEYS}
    assert np.isfinite(gpu.critic_steps(stacked, target_every=2)["critic_loss"])  # the ERL critic's path
    assert np.isfinite(gpu.actor_steps(stacked["obs"])["actor_loss"])  # an RL individual's, on a runner's GPU
    assert all(p.device.type == "cuda" for net in (gpu.critic, gpu.critic_target) for p in net.parameters())
    state = gpu.get_state()
    assert state["generator_device"] == "cuda" and _all_tensors_on_cpu(state)
    cpu = TD3Updater(3, SPACE, hiddens=(16,), seed=99)
    cpu.set_state(state)
    b = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in _batch(8, seed=7).items()}
    q_gpu = gpu.critic.q1(b["obs"].cuda(), b["actions"].cuda()).cpu()
    torch.testing.assert_close(cpu.critic.q1(b["obs"], b["actions"]), q_gpu, rtol=1e-4, atol=1e-5)
    cpu.update(_batch(16, seed=8))  # the moments moved to the CPU with the state


def test_updater_rejects_bad_settings():
    with pytest.raises(ValueError, match="Box"):
        TD3Updater(3, gym.spaces.Discrete(2))
    with pytest.raises(ValueError, match="policy_delay"):
        TD3Updater(3, SPACE, policy_delay=0)
    with pytest.raises(ValueError, match="tau"):
        TD3Updater(3, SPACE, tau=0.0)
    with pytest.raises(ValueError, match="lacks"):
        TD3Updater(3, SPACE, hiddens=(4,)).update({"obs": np.zeros((2, 3))})


def test_td3_updater_takes_any_optimizer_by_name():
    """Optimizers are selectable by name in every algorithm that takes gradient steps (rllib_ext.optim)."""
    import gymnasium as gym

    from rllib_ext.common.offpolicy.td3 import TD3Updater
    from rllib_ext.optim import MSGD

    space = gym.spaces.Box(-1.0, 1.0, (1,))
    upd = TD3Updater(3, space, hiddens=(8,), optimizer="msgd", actor_lr=0.01, seed=0)
    assert isinstance(upd.actor_optimizer, MSGD) and isinstance(upd.critic_optimizer, MSGD)
    before = upd.actor.get_flat()
    upd.actor_step(np.zeros((4, 3), np.float32) + 0.3)
    # MSGD (paper 000 Eq. 19): a step of norm 0.23·η·√d whatever the gradient's size.
    d = before.size
    assert np.linalg.norm(upd.actor.get_flat() - before) == pytest.approx(0.23 * 0.01 * np.sqrt(d), rel=1e-4)
    with pytest.raises(ValueError, match="optimizer"):
        TD3Updater(3, space, hiddens=(8,), optimizer="bogus")


def test_adam_is_fused_by_default_and_takes_the_same_steps():
    """TD3Updater's Adam is torch's fused one (fewer kernels per step) unless optimizer_kwargs say
    otherwise; it is the same update as the per-tensor loop, to float rounding."""
    fused = TD3Updater(3, SPACE, hiddens=(16,), seed=6)
    loop = TD3Updater(3, SPACE, hiddens=(16,), seed=6, optimizer_kwargs={"foreach": False})
    assert fused.critic_optimizer.defaults["fused"] and fused.actor_optimizer.defaults["fused"]
    assert not loop.critic_optimizer.defaults["fused"]
    for i in range(5):
        fused.update(_batch(16, seed=i))
        loop.update(_batch(16, seed=i))
    for name in ("actor", "critic", "actor_target", "critic_target"):
        torch.testing.assert_close(_params(getattr(fused, name)), _params(getattr(loop, name)), rtol=1e-5, atol=1e-6)
    sgd = TD3Updater(3, SPACE, hiddens=(16,), optimizer="sgd")
    assert "fused" not in sgd.critic_optimizer.defaults or not sgd.critic_optimizer.defaults["fused"]
