"""IMPACT_EXT's torch learner on hand-made batches (learner built in-process, no Ray).

* The critic's target and A^{V-GAE} of paper 004 (Algorithm 1 line 8, §3.1) off-policy
  (π_target ≠ π_worker, ratios on both sides of ρ̄ and c̄), against the paper's explicit double
  sum on RLlib's batch layout: episode chunks, each followed by one phantom step (loss_mask 0),
  concatenated; the learner runs the traces over that flat batch as one column.
* The same per worker sample batch (fragment) at paper 004's Table 1 scale (M = 500, S = 50,
  γ = 0.99, λ = 0.995), with episodes ending inside fragments.
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
from rllib_ext.algorithms.impact.torch.impact_torch_learner import BATCH_CONSTANTS

GAMMA = 0.9
T = 5  # rollout_fragment_length (it does not cut traces: chunk 0 below is 5 steps with its phantom)


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
# ends in a terminal. 4 + 1 + 2 + 1 = 8 steps, one column.
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


def _paper_double_sum(chunk, lam, rho_bar, c_bar):
    """§3.1: A_t = Σ_{i=t}^{L−1} (λγ)^{i−t} (Π_{j=t}^{i−1} c_j) δ_i V, δ_i V = ρ_i (r_i + γV_{i+1} − V_i),
    ρ_i = min(ρ̄, πt/πw), c_j = min(c̄, πt/πw); V_L = V(s_L) after a cut, 0 after a terminal."""
    r, v, ratio = chunk["r"], chunk["v"].copy(), chunk["ratio"]
    L = len(r)
    if chunk["terminated"]:
        v[L] = 0.0
    rho, c = np.minimum(rho_bar, ratio), np.minimum(c_bar, ratio)
    delta = rho * (r + GAMMA * v[1:] - v[:L])
    adv = np.zeros(L)
    for t in range(L):
        for i in range(t, L):
            adv[t] += (lam * GAMMA) ** (i - t) * np.prod(c[t:i]) * delta[i]
    return adv, v[:L]


def _flat_real(x):
    """Time-major [T, B] (here one column, [N, 1]) back to the flat order, real steps only."""
    n = sum(length + 1 for length, _ in CHUNKS)
    flat = x.transpose(0, 1).reshape(-1)[:n].double().numpy()
    real = np.concatenate([[True] * length + [False] for length, _ in CHUNKS])
    return flat[real]


@pytest.mark.parametrize(
    "lam,rho_bar,c_bar",
    [(0.7, 1.0, 1.0), (0.7, 2.0, 0.5), (0.7, 2.0, 1.0), (1.0, 1.0, 0.5), (0.0, 2.0, 1.0)],
)
@pytest.mark.parametrize("value_target", ["v_gae", "vtrace"])
def test_critic_target_and_advantage_off_policy_match_the_paper(learner, lam, rho_bar, c_bar, value_target):
    """A = A^{V-GAE} with the configured ρ̄ and c̄; the critic target is V + A^{V-GAE} (the default,
    λ-consistent) or V + A^{V-GAE} at λ = 1 (= V-trace's v_s), both off-policy."""
    config = _config(
        learner,
        lambda_=lam,
        vtrace_clip_rho_threshold=rho_bar,
        vtrace_clip_c_threshold=c_bar,
        value_target=value_target,
    )
    batch, values, chunks = _hand_made_batch()
    targets, adv = learner.value_targets_and_advantages(config=config, batch=batch, values=values)
    expected_adv, expected_targets = [], []
    for chunk in chunks:
        a, v = _paper_double_sum(chunk, lam, rho_bar, c_bar)
        a_target = a if value_target == "v_gae" else _paper_double_sum(chunk, 1.0, rho_bar, c_bar)[0]
        expected_adv.append(a)
        expected_targets.append(chunk["v"][: len(a)] + a_target)
    np.testing.assert_allclose(_flat_real(adv), np.concatenate(expected_adv), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_flat_real(targets), np.concatenate(expected_targets), rtol=1e-5, atol=1e-5)


def test_default_critic_target_is_lambda_consistent(learner):
    """IMPACTConfig's default regresses the critic on V + A^{V-GAE} (Algorithm 1 line 8), not on the
    λ = 1 V-trace target: with λ < 1 off-policy, the two differ and the default is the first."""
    assert IMPACTConfig().value_target == "v_gae"
    batch, values, _ = _hand_made_batch(seed=1)
    config = _config(learner, lambda_=0.5)
    targets, adv = learner.value_targets_and_advantages(config=config, batch=batch, values=values)
    v_tm = learner._time_major_fn(config, batch)(values)
    np.testing.assert_allclose(_flat_real(targets), _flat_real(v_tm + adv), rtol=1e-6, atol=1e-6)
    vtrace, _ = learner.value_targets_and_advantages(
        config=_config(learner, lambda_=0.5, value_target="vtrace"), batch=batch, values=values
    )
    assert np.abs(_flat_real(vtrace) - _flat_real(targets)).max() > 1e-2


def test_batch_constants_are_built_once_per_batch_and_config(learner):
    """The V-trace GAE-λ operator is built at a batch's first loss (k = 0) and reused by its later
    draws while the critic's values change; a different λ rebuilds it. Results equal a fresh build."""
    config = _config(learner, lambda_=0.7, vtrace_clip_c_threshold=0.5, vtrace_clip_rho_threshold=2.0)
    batch, values, _ = _hand_made_batch(seed=2)
    first = learner.value_targets_and_advantages(config=config, batch=batch, values=values)
    constants = batch[BATCH_CONSTANTS]
    moved = values * 0.5 + 1.0  # the critic after some updates
    again = learner.value_targets_and_advantages(config=config, batch=batch, values=moved)
    assert batch[BATCH_CONSTANTS] is constants
    fresh, _, _ = _hand_made_batch(seed=2)
    expected = learner.value_targets_and_advantages(config=config, batch=fresh, values=moved)
    for got, want in zip(again, expected, strict=True):
        torch.testing.assert_close(got, want)
    assert not torch.allclose(first[0], again[0])
    other = _config(learner, lambda_=0.3, vtrace_clip_c_threshold=0.5, vtrace_clip_rho_threshold=2.0)
    learner.value_targets_and_advantages(config=other, batch=batch, values=values)
    assert batch[BATCH_CONSTANTS] is not constants and batch[BATCH_CONSTANTS].key[1] == 0.3


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


# ---------------------------------------------------------------------------------------------
# Paper 004 Table 1 scale: traces per worker sample batch (fragment), as §3.1 defines them.
# ---------------------------------------------------------------------------------------------
S = 50  # Table 1 "Sample Batch Size": env steps per worker fragment (rollout_fragment_length)
M = 500  # Table 1 "Train Batch Size": env steps per train batch, here M / S = 10 fragments


@pytest.fixture(scope="module")
def table1_learner():
    """Table 1's defaults (γ = 0.99, λ = 0.995, S = 50, M = 500, ρ̄ = c̄ = 1), a small network."""
    config = IMPACTConfig().rl_module(model_config={"fcnet_hiddens": [8]}).debugging(seed=0)
    assert (config.gamma, config.lambda_, config.rollout_fragment_length, config.train_batch_size_per_learner) == (
        0.99,
        0.995,
        S,
        M,
    )
    spaces = {DEFAULT_MODULE_ID: (gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2))}
    return config.build_learner(spaces=spaces)


def table1_worker_stream(seed=0, num_fragments=M // S):
    """One worker's env steps, cut into fragments of S steps, episodes ending inside them.

    Episodes last 5 to 120 steps; every 4th ends by a time limit (truncated: the last step
    bootstraps from V of the final observation), the others terminate (bootstrap 0). Each step
    has r, V(s), V(s') and an off-policy pair (π_worker, π_target) with π_target/π_worker from
    1/4 to 4, so ρ̄ = c̄ = 1 truncate about half of the steps.

    Returns:
        ``fragments``: per fragment, arrays of its S steps (the paper's view) and ``chunks``:
        the same steps as RLlib's learner connector lays them out, one chunk per (fragment,
        episode) piece, each followed by a phantom step holding V(s_L) (loss_mask 0).
    """
    gen = np.random.default_rng(seed)
    n = num_fragments * S
    steps = {key: np.zeros(n) for key in ("r", "v", "v_next", "logp_w", "logp_t")}
    terminated, done = np.zeros(n, bool), np.zeros(n, bool)
    v, left, episode = gen.normal(), int(gen.integers(5, 121)), 0
    for t in range(n):
        steps["r"][t], steps["v"][t] = gen.normal(), v
        steps["logp_w"][t] = np.log(gen.uniform(0.05, 0.95))
        steps["logp_t"][t] = steps["logp_w"][t] + gen.uniform(np.log(0.25), np.log(4.0))
        steps["v_next"][t] = v = gen.normal()  # V(s_{t+1}): the next or the final observation
        left -= 1
        if left == 0:  # the episode ends at t; the next one starts from a reset observation
            done[t], terminated[t] = True, episode % 4 != 1  # every 4th episode is truncated
            v, left, episode = gen.normal(), int(gen.integers(5, 121)), episode + 1
    fragments, chunks = [], []
    for f in range(num_fragments):
        sl = slice(f * S, (f + 1) * S)
        frag = {key: x[sl] for key, x in steps.items()} | {"terminated": terminated[sl], "done": done[sl]}
        fragments.append(frag)
        start = 0
        for end in [*(np.flatnonzero(frag["done"][:-1]) + 1), S]:  # chunk = [start, end)
            piece = {key: x[start:end] for key, x in frag.items()}
            chunks.append(piece | {"v_phantom": piece["v_next"][-1], "terminated_end": bool(piece["terminated"][-1])})
            start = end
    return fragments, chunks


def table1_batch(chunks):
    """The flat learner batch of ``chunks`` (RLlib's layout: each chunk, then its phantom step) and V."""
    cols = {key: [] for key in ("mask", "term", "r", "logp_w", "logp_t", "v")}
    for c in chunks:
        L = len(c["r"])
        cols["mask"] += [1.0] * L + [0.0]
        cols["term"] += [0.0] * (L - 1) + [float(c["terminated_end"]), 0.0]
        cols["r"] += [*c["r"], 0.0]  # the phantom step's reward is 0 (and its discount, below)
        cols["logp_w"] += [*c["logp_w"], c["logp_w"][-1]]
        cols["logp_t"] += [*c["logp_t"], c["logp_t"][-1]]
        cols["v"] += [*c["v"], c["v_phantom"]]
    f32 = lambda x: torch.tensor(np.asarray(x), dtype=torch.float32)  # noqa: E731
    batch = {
        Columns.LOSS_MASK: f32(cols["mask"]).bool(),
        Columns.TERMINATEDS: f32(cols["term"]).bool(),
        Columns.REWARDS: f32(cols["r"]),
        Columns.ACTION_LOGP: f32(cols["logp_w"]),
        TARGET_LOGP: f32(cols["logp_t"]),
    }
    return batch, f32(cols["v"])


def paper_per_fragment_advantages(frag, *, gamma, lam, rho_bar, c_bar):
    """§3.1 for one worker sample batch of S steps, as an explicit double sum:

    A_t = Σ_{i=t}^{t+n−1} (λγ)^{i−t} (Π_{j=t}^{i−1} c_j) δ_i V, with
    δ_i V = ρ_i (r_i + γ V(s_{i+1}) − V(s_i)), ρ_i = min(ρ̄, πt/πw), c_j = min(c̄, πt/πw),
    where the trace of step t runs to the end of its episode inside the fragment or to the
    fragment's end (t + n − 1 ≤ S − 1), and V(s_{i+1}) = 0 after a terminal step.
    """
    ratio = np.exp(frag["logp_t"] - frag["logp_w"])
    rho, c = np.minimum(rho_bar, ratio), np.minimum(c_bar, ratio)
    v_next = np.where(frag["terminated"], 0.0, frag["v_next"])
    delta = rho * (frag["r"] + gamma * v_next - frag["v"])
    adv = np.zeros(S)
    for t in range(S):
        for i in range(t, S):
            adv[t] += (lam * gamma) ** (i - t) * np.prod(c[t:i]) * delta[i]
            if frag["done"][i]:  # the episode ends at step i: the trace ends with it
                break
    return adv


def learner_real_steps(x, batch):
    """A learner tensor (any layout of the flat batch's order, e.g. [N, 1]) at the real steps, flat."""
    n = len(batch[Columns.LOSS_MASK])
    flat = x.transpose(0, 1).reshape(-1)[:n].double().numpy()
    return flat[batch[Columns.LOSS_MASK].numpy()]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_advantages_per_fragment_at_table1_scale_match_the_paper(table1_learner, seed):
    """M = 500 env steps of S = 50-step fragments, γ = 0.99, λ = 0.995, off-policy, episodes that
    terminate or are truncated inside fragments: the learner's A^{V-GAE} and critic target
    V + A^{V-GAE} equal §3.1's double sum per fragment at every step.

    RLlib's flat batch adds a phantom step after every (fragment, episode) chunk, so it is
    longer than M; a layout that cut it into rows of S steps would end traces early wherever a
    row boundary falls inside a fragment (before the fix, about half of the steps).
    """
    learner = table1_learner
    config = learner.config.get_config_for_module(DEFAULT_MODULE_ID)
    fragments, chunks = table1_worker_stream(seed)
    assert len(chunks) > len(fragments)  # episodes end inside fragments: more chunks than fragments
    assert any(c["terminated_end"] for c in chunks) and any(f["done"][~f["terminated"]].any() for f in fragments)
    batch, values = table1_batch(chunks)
    targets, adv = learner.value_targets_and_advantages(config=config, batch=batch, values=values)
    expected = np.concatenate(
        [
            paper_per_fragment_advantages(
                f,
                gamma=config.gamma,
                lam=config.lambda_,
                rho_bar=config.vtrace_clip_rho_threshold,
                c_bar=config.vtrace_clip_c_threshold,
            )
            for f in fragments
        ]
    )
    v = np.concatenate([f["v"] for f in fragments])
    np.testing.assert_allclose(learner_real_steps(adv, batch), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(learner_real_steps(targets, batch), v + expected, rtol=1e-4, atol=1e-4)


def test_a_batch_without_its_last_bootstrap_step_is_rejected(learner):
    """The one column needs RLlib's phantom step last (V(s_T) of the last chunk): a batch that
    ends on a real step gets a clear error, not a silent bootstrap from nothing."""
    batch, values, _ = _hand_made_batch(seed=3)
    batch[Columns.LOSS_MASK][-1] = True
    with pytest.raises(ValueError, match="ends on a real step"):
        learner.value_targets_and_advantages(config=_config(learner), batch=batch, values=values)


def test_nonfinite_weights_check_names_nan_and_inf_not_huge_finite_weights(learner):
    """The snapshot's check: one fused reduction; the exact per-parameter pass only when it flags
    (a 2-norm overflows for finite weights beyond ~1e19, which are cleared, not reported)."""
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    name, param = next(iter(module.named_parameters()))
    saved = param.detach().clone()
    try:
        assert learner._nonfinite_weights([DEFAULT_MODULE_ID]) == []
        with torch.no_grad():
            param.view(-1)[0] = 1e30
        assert learner._nonfinite_weights([DEFAULT_MODULE_ID]) == []
        for bad in (float("nan"), float("inf"), float("-inf")):
            with torch.no_grad():
                param.view(-1)[0] = bad
            assert learner._nonfinite_weights([DEFAULT_MODULE_ID]) == [f"{DEFAULT_MODULE_ID}/{name}"]
    finally:
        with torch.no_grad():
            param.copy_(saved)
