"""DDPG's loss on hand-made minibatches (learner built in-process, no Ray): Algorithm 4 puts β
and the D_KL penalty on the policy network only; the critic learns from the Rule-1-masked TD
error (Eq. 2) and the DPG (Eq. 3) does not train the critic."""

from __future__ import annotations

import pytest
import torch
from ray.rllib.core import DEFAULT_MODULE_ID

from rllib_ext.algorithms.ddpg.ddpg import DDPGConfig
from tests.builders import refer_loss_gradients, small_refer_learner
from tests.replay_data import loss_batch


def _setup():
    torch.manual_seed(0)
    learner = small_refer_learner(DDPGConfig)
    module = learner.module[DEFAULT_MODULE_ID]
    obs = torch.randn(8, 3)
    with torch.no_grad():
        mean = module.policy_mean(obs)
    return learner, module, loss_batch(obs, mean, torch.full_like(mean, module.sigma))


def _part(grads, prefix):
    return {n: g for n, g in grads.items() if n.startswith(prefix)}


def test_critic_gradient_does_not_depend_on_beta():
    learner, _, batch = _setup()
    grads = {beta: refer_loss_gradients(learner, batch, beta=beta)[1] for beta in (1.0, 0.3, 0.0)}
    for beta in (0.3, 0.0):
        for name, g in _part(grads[beta], "critic.").items():
            torch.testing.assert_close(g, grads[1.0][name])
    for name, g in _part(grads[0.3], "actor.").items():  # the actor's is β·ĝ^DPG + (1−β)·ĝ^D
        torch.testing.assert_close(g, 0.3 * grads[1.0][name] + 0.7 * grads[0.0][name], rtol=1e-4, atol=1e-8)
    assert any(not torch.allclose(grads[1.0][n], grads[0.0][n]) for n in _part(grads[1.0], "actor."))


def test_critic_gets_only_its_td_loss_and_the_actor_only_the_dpg():
    """Critic: ∇[½ mean (Q(s, a) − q̂)² + ½λ‖w'‖²] (Eq. 2, App. A); actor at β = 1:
    ∇[−mean Q(s, m(s))] (Eq. 3) with the critic held fixed."""
    learner, module, batch = _setup()
    _, g = refer_loss_gradients(learner, batch, beta=1.0)
    cfg = learner.config
    module.zero_grad(set_to_none=True)
    with torch.no_grad():
        next_obs = batch["next_obs"]
        q_next = module.q_value(next_obs, module.policy_mean(next_obs, target=True), target=True)
        q_hat = batch["rewards"] + cfg.gamma * q_next
    critic_loss = 0.5 * ((module.q_value(batch["obs"], batch["actions"]) - q_hat) ** 2).mean()
    decay = 0.5 * cfg.critic_weight_decay * sum((p**2).sum() for p in module.critic.parameters())
    (critic_loss + decay).backward()
    for name, p in module.critic.named_parameters():
        torch.testing.assert_close(g[f"critic.{name}"], p.grad, rtol=1e-4, atol=1e-8)
    module.zero_grad(set_to_none=True)
    (-module.q_value(batch["obs"], module.policy_mean(batch["obs"])).mean()).backward()
    for name, p in module.actor.named_parameters():
        torch.testing.assert_close(g[f"actor.{name}"], p.grad, rtol=1e-4, atol=1e-8)


@pytest.mark.parametrize("optimizer", ["actor", "critic"])
def test_each_optimizer_steps_only_its_network(optimizer):
    learner, module, batch = _setup()
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    refer_loss_gradients(learner, batch, beta=1.0)
    learner._named_optimizers[f"{DEFAULT_MODULE_ID}_{optimizer}"].step()
    other = "critic" if optimizer == "actor" else "actor"
    for name, p in module.named_parameters():
        if name.startswith(f"{other}.") or name.startswith("target_"):
            assert torch.equal(p, before[name]), name
    assert any(not torch.equal(p, before[n]) for n, p in module.named_parameters() if n.startswith(f"{optimizer}."))
