"""NAF's loss on hand-made minibatches (learner built in-process, no Ray): where β of Eq. (10) acts.

The network's output layer has one row per output: V (row 0), m (rows 1..d_A), then the entries
of L; its bias gradient is ∂loss/∂output summed over the batch, which gives closed forms.
"""

from __future__ import annotations

import pytest
import torch
from ray.rllib.core import DEFAULT_MODULE_ID

from rllib_ext.algorithms.naf.naf import NAFConfig
from tests.builders import refer_loss_gradients, small_refer_learner
from tests.replay_data import loss_batch

D_A = 2
V_ROW, M_ROWS, L_ROWS = slice(0, 1), slice(1, 1 + D_A), slice(1 + D_A, None)


def _setup(**training):
    torch.manual_seed(0)
    learner = small_refer_learner(NAFConfig, act_dim=D_A, **training)
    module = learner.module[DEFAULT_MODULE_ID]
    with torch.no_grad():
        for p in module.net[-1].parameters():  # a non-trivial V, m and L
            p.add_(0.3 * torch.randn_like(p))
        obs = torch.randn(8, 3)
        v, mean, L = module.naf_outputs(obs)
    batch = loss_batch(obs, mean, torch.full_like(mean, module.sigma))
    with torch.no_grad():  # the Q-learning target of Eq. (2), with the target network
        q_hat = batch["rewards"] + NAFConfig().gamma * module.naf_outputs(batch["next_obs"], target=True)[0]
    return learner, module, batch, (v, mean, L, q_hat)


def _out_grads(grads):
    return grads["net.4.weight"], grads["net.4.bias"]


def test_beta_weighs_only_the_gradient_of_the_mean():
    """smarties' NAF::Train: grad[m] = β·grad[m] + (1−β)·penG; V and L keep the full TD error."""
    learner, module, batch, (v, mean, L, q_hat) = _setup()
    sigma = module.sigma
    d = batch["actions"] - mean
    q = v - ((L.transpose(1, 2) @ d[:, :, None]) ** 2).sum((1, 2))  # Eq. (4)
    dq_dm = 2 * (L @ L.transpose(1, 2) @ d[:, :, None])[:, :, 0]  # ∂Q/∂m = 2 L Lᵀ (a − m)
    mu_mean = batch["mu"][:, :D_A]
    dkl_dm = (mean - mu_mean) / sigma**2  # ∂D_KL(μ‖π)/∂m_π (Eq. 11)
    B = len(q)
    grads = {}
    for beta in (1.0, 0.3, 0.0):
        _, g = refer_loss_gradients(learner, batch, beta=beta)
        w, b = _out_grads(g)
        grads[beta] = w
        # V: the full TD error whatever β (the old placement gave β·mean[Q − q̂]).
        torch.testing.assert_close(b[0], (q - q_hat).sum() / B, rtol=1e-4, atol=1e-6)
        # m: β·(TD gradient) + (1 − β)·(penalty gradient).
        expected_m = beta * ((q - q_hat)[:, None] * dq_dm).sum(0) / B + (1 - beta) * dkl_dm.sum(0) / B
        torch.testing.assert_close(b[M_ROWS], expected_m, rtol=1e-4, atol=1e-6)
    for beta in (0.3, 0.0):  # V and L rows do not depend on β; m's rows are linear in β
        torch.testing.assert_close(grads[beta][V_ROW], grads[1.0][V_ROW])
        torch.testing.assert_close(grads[beta][L_ROWS], grads[1.0][L_ROWS])
        torch.testing.assert_close(grads[beta][M_ROWS], beta * grads[1.0][M_ROWS] + (1 - beta) * grads[0.0][M_ROWS])
    assert not torch.allclose(grads[1.0][M_ROWS], grads[0.0][M_ROWS])


def test_at_beta_one_the_gradient_is_the_plain_q_learning_gradient():
    """β = 1: the split loss has the gradient of ½ mean[(Q − q̂)²] (Eq. 2) for every parameter."""
    learner, module, batch, (_, _, _, q_hat) = _setup()
    _, g = refer_loss_gradients(learner, batch, beta=1.0)
    module.zero_grad(set_to_none=True)
    v, mean, L = module.naf_outputs(batch["obs"])
    (0.5 * ((module.q_value(v, mean, L, batch["actions"]) - q_hat) ** 2).mean()).backward()
    for name, p in module.net.named_parameters():
        torch.testing.assert_close(g[f"net.{name}"], p.grad, rtol=1e-4, atol=1e-7)


def test_whole_placement_scales_the_whole_q_loss():
    learner, module, batch, (v, mean, L, q_hat) = _setup(naf_beta_placement="whole")
    q = module.q_value(v, mean, L, batch["actions"])
    _, g = refer_loss_gradients(learner, batch, beta=0.3)
    torch.testing.assert_close(_out_grads(g)[1][0], 0.3 * (q - q_hat).mean(), rtol=1e-4, atol=1e-6)


def test_beta_placement_is_validated():
    with pytest.raises(ValueError, match="naf_beta_placement"):
        NAFConfig().environment("Pendulum-v1").training(naf_beta_placement="value").validate()
    assert NAFConfig().naf_beta_placement == "mean"
