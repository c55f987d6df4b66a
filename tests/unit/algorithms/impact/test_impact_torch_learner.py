"""IMPACT_EXT's torch learner on hand-made batches (learner built in-process, no Ray).

RLlib's batch layout: episode chunks, each followed by one phantom step (loss_mask 0),
concatenated and cut into time-major rows of ``rollout_fragment_length`` steps.

* NaN-safety of the loss: a fully masked batch, and a phantom step whose ratio overflows.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from rllib_ext.algorithms.impact.impact import IMPACTConfig
from rllib_ext.algorithms.impact.impact_learner import TARGET_DIST_INPUTS, TARGET_LOGP

GAMMA = 0.9
T = 5  # rollout_fragment_length: the time-major row length


@pytest.fixture(scope="module")
def learner():
    config = (
        IMPACTConfig()
        .env_runners(rollout_fragment_length=T)
        .rl_module(model_config={"fcnet_hiddens": [8]})
        .training(gamma=GAMMA)
        .debugging(seed=0)
    )
    spaces = {DEFAULT_MODULE_ID: (gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2))}
    return config.build_learner(spaces=spaces)


def _config(learner, **settings):
    config = learner.config.get_config_for_module(DEFAULT_MODULE_ID).copy(copy_frozen=False)
    for key, value in settings.items():
        setattr(config, key, value)
    return config


# Two episode chunks as RLlib's learner connector lays them out: chunk 0 has 4 real steps and is
# cut before its episode ends (bootstrap from V of its phantom step); chunk 1 has 2 real steps and
# ends in a terminal. 4 + 1 + 2 + 1 = 8 steps, rows of T = 5: row 0 is chunk 0, row 1 is chunk 1
# plus 2 padding steps that make_time_major adds.
CHUNKS = [(4, False), (2, True)]


def _hand_made_batch(seed=0):
    """Flat columns of the two chunks, off-policy log-probabilities, values; and per-chunk data."""
    gen = np.random.default_rng(seed)
    mask, term, rewards, values, logp_w, logp_t, chunks = [], [], [], [], [], [], []
    for length, terminated in CHUNKS:
        r = gen.normal(size=length)
        v = gen.normal(size=length + 1)  # V(s_0..s_L); V(s_L) sits on the phantom step
        lw = np.log(gen.uniform(0.05, 0.95, size=length))
        # π_target/π_worker from 0.25 to 4: ρ̄ = 2 and c̄ = 0.5 both bite, and ratios < 1 too.
        lt = lw + gen.uniform(np.log(0.25), np.log(4.0), size=length)
        chunks.append(dict(r=r, v=v, ratio=np.exp(lt - lw), terminated=terminated))
        mask += [1.0] * length + [0.0]
        term += [0.0] * (length - 1) + [float(terminated), 0.0]
        rewards += [*r, 0.0]
        values += list(v)
        # The phantom step repeats the chunk's last action under three policies.
        logp_w += [*lw, lw[-1]]
        logp_t += [*lt, lt[-1]]
    f32 = lambda x: torch.tensor(np.asarray(x), dtype=torch.float32)  # noqa: E731
    batch = {
        Columns.LOSS_MASK: f32(mask).bool(),
        Columns.TERMINATEDS: f32(term).bool(),
        Columns.REWARDS: f32(rewards),
        Columns.ACTION_LOGP: f32(logp_w),
        TARGET_LOGP: f32(logp_t),
    }
    return batch, f32(values), chunks


def _loss_batch(learner, *, mask, seed=0):
    """A full loss batch over CHUNKS' layout: observations, actions, three policies' log-probs."""
    batch, _, _ = _hand_made_batch(seed)
    n = len(batch[Columns.REWARDS])
    gen = torch.Generator().manual_seed(seed)
    obs = torch.rand((n, 3), generator=gen) * 2 - 1
    actions = torch.randint(0, 2, (n,), generator=gen)
    target_inputs = torch.randn((n, 2), generator=gen)
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    dist = module.get_train_action_dist_cls().from_logits(target_inputs)
    batch.update(
        {
            Columns.OBS: obs,
            Columns.ACTIONS: actions,
            TARGET_DIST_INPUTS: target_inputs,
            TARGET_LOGP: dist.logp(actions),
            Columns.LOSS_MASK: torch.as_tensor(mask, dtype=torch.bool),
        }
    )
    return batch


def _loss_and_grads(learner, batch, **settings):
    module = learner.module[DEFAULT_MODULE_ID]
    module.zero_grad(set_to_none=True)
    loss = learner.compute_loss_for_module(
        module_id=DEFAULT_MODULE_ID,
        config=_config(learner, **settings),
        batch=batch,
        fwd_out=module.forward_train(batch),
    )
    loss.backward()
    grads = [p.grad for p in module.parameters() if p.grad is not None]
    return loss.detach(), grads


def test_fully_masked_batch_gives_zero_loss_not_nan(learner):
    """A batch with no valid step (loss_mask all 0): every masked mean is 0, not 0/0."""
    batch = _loss_batch(learner, mask=[0] * 8)
    loss, grads = _loss_and_grads(learner, batch, use_kl_loss=True, kl_coeff=1.0)
    assert float(loss) == 0.0
    assert grads and all(torch.isfinite(g).all() and not g.any() for g in grads)


def test_overflowing_ratio_on_a_phantom_step_does_not_poison_the_loss(learner):
    """A phantom step (masked) where π_target and π_worker give the action ~e^-10000: R3's
    denominator underflows, so its ratio is inf. Loss and gradients must stay finite and equal
    those of the same batch with ordinary values on that step."""
    mask = [1, 1, 1, 1, 0, 1, 1, 0]
    normal = _loss_batch(learner, mask=mask)
    poisoned = {k: v.clone() for k, v in normal.items()}
    for key in (TARGET_LOGP, Columns.ACTION_LOGP):
        poisoned[key][4] = -1e4
    loss, grads = _loss_and_grads(learner, poisoned)
    assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads)
    loss_ref, grads_ref = _loss_and_grads(learner, normal)
    torch.testing.assert_close(loss, loss_ref)
    for g, g_ref in zip(grads, grads_ref, strict=True):
        torch.testing.assert_close(g, g_ref)
