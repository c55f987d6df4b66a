"""The ReF-ER learners' own gradient step (issue 19, "Faster learner") against RLlib's ``Learner.update``:
same parameters, targets, optimizer state and memory after a few steps; the soft target update
against RLlib's ``update_target_network``; fused Adam against the per-tensor loop; RLlib's nan/inf
handling kept; metrics logged once per ``train_on_episodes`` call as means; checkpoints; V-RACER's V(s_T)
from the minibatch's forward pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ray.rllib.core import DEFAULT_MODULE_ID

from rllib_ext.algorithms.ddpg.ddpg import DDPGConfig
from rllib_ext.algorithms.naf.naf import NAFConfig
from rllib_ext.algorithms.vracer.vracer import VRACERConfig
from rllib_ext.common.offpolicy.target_networks import lerp_targets, soft_update_tensors
from tests.builders import small_refer_learner
from tests.replay_data import replay_episode

B = 16


def _fill(learner, seed=0, terminated=True, lens=(30, 45, 25)):
    rng = np.random.default_rng(seed)
    for T in lens:
        ep = replay_episode(T, rng, d_s=3, d_a=2, terminated=terminated)
        learner.memory.add_episode(**ep, **learner._score_episode(ep))
    return learner


def _twins(config_cls, terminated=True, **training):
    """Two learners with the same weights, optimizer state, memory and sampler."""
    a = small_refer_learner(config_cls, train_batch_size_per_learner=B, **training)
    b = small_refer_learner(config_cls, train_batch_size_per_learner=B, **training)
    b.set_state(a.get_state())
    return _fill(a, terminated=terminated), _fill(b, terminated=terminated)


def _weights(learner):
    return {k: torch.as_tensor(np.asarray(v)) for k, v in learner.module[DEFAULT_MODULE_ID].get_state().items()}


def _assert_same_weights(a, b, rtol=1e-5, atol=1e-6):
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=rtol, atol=atol, msg=k)


@pytest.mark.parametrize(
    "config_cls,mode", [(VRACERConfig, "refer"), (VRACERConfig, "per"), (DDPGConfig, "refer"), (NAFConfig, "refer")]
)
def test_own_step_equals_rllib_learner_update(config_cls, mode):
    """Weights, target networks, stored ρ/V/V̂^tbc and β after 4 steps equal those of the same steps
    through Learner.update (terminated episodes: no V(s_T) refresh, see the V-RACER test below)."""
    fast, rllib = _twins(config_cls, replay_mode=mode)
    rllib._uses_rllib_update = lambda: True
    before = _weights(fast)
    for _ in range(4):
        fast._gradient_step()
        rllib._gradient_step()
    assert any(not torch.equal(before[k], v) for k, v in _weights(fast).items())
    _assert_same_weights(fast, rllib)
    for col in ("rho", "v", "v_tbc", "td"):
        np.testing.assert_allclose(fast.memory.column(col), rllib.memory.column(col), rtol=1e-5, atol=1e-6)
    assert fast.refer.beta == pytest.approx(rllib.refer.beta, abs=1e-12)
    assert fast._weights_seq_no == rllib._weights_seq_no == 4


def test_soft_update_equals_rllib_update_target_network():
    from ray.rllib.core.learner.utils import update_target_network

    torch.manual_seed(0)
    for tau in (0.01, 0.3, 1.0):
        main = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Softsign(), torch.nn.BatchNorm1d(8))
        target = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Softsign(), torch.nn.BatchNorm1d(8))
        for net in (main, target):
            for t in list(net.parameters()) + [net[2].running_mean, net[2].running_var]:
                t.data.normal_()
        reference = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Softsign(), torch.nn.BatchNorm1d(8))
        reference.load_state_dict(target.state_dict())
        update_target_network(main_net=main, target_net=reference, tau=tau)
        lerp_targets(*soft_update_tensors(main, target), tau)
        for k, v in reference.state_dict().items():
            torch.testing.assert_close(target.state_dict()[k], v, rtol=1e-6, atol=1e-7, msg=k)


@pytest.mark.parametrize("config_cls", [VRACERConfig, DDPGConfig, NAFConfig])
def test_fused_adam_matches_the_per_tensor_loop(config_cls):
    fused, loop = _twins(config_cls)
    loop_opt = small_refer_learner(config_cls, train_batch_size_per_learner=B, optimizer_kwargs={"fused": False})
    loop_opt.set_state(loop.get_state())
    loop = _fill(loop_opt)
    assert all(o.defaults["fused"] for o in fused._named_optimizers.values())
    assert not any(o.defaults["fused"] for o in loop._named_optimizers.values())
    for _ in range(5):
        fused._gradient_step()
        loop._gradient_step()
    _assert_same_weights(fused, loop, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("config_cls", [VRACERConfig, DDPGConfig])
def test_non_finite_gradients_take_rllibs_nan_handling(config_cls, monkeypatch):
    """RLlib's apply_gradients zeroes nan/inf gradients (torch_skip_nan_gradients False): with a NaN
    loss the first Adam step leaves every weight as it was instead of making it NaN."""
    learner = _fill(small_refer_learner(config_cls, train_batch_size_per_learner=B))
    terms = learner.loss_terms

    def nan_loss(*args):
        loss, outputs = terms(*args)
        return loss * float("nan"), outputs

    monkeypatch.setattr(learner, "loss_terms", nan_loss)
    before = _weights(learner)
    learner._update_on_sample(learner.memory.sample(B))
    for k, v in _weights(learner).items():
        assert torch.equal(v, before[k]), k


def test_metrics_are_logged_once_per_call_as_means_over_its_steps():
    learner = _fill(small_refer_learner(VRACERConfig, train_batch_size_per_learner=B))
    learner._state_stats_set = True
    recorded = []
    accumulate = learner._accumulate_metric_vector

    def spy(module_id, names, values):
        recorded.append(dict(zip(names, values.tolist(), strict=True)))
        accumulate(module_id, names, values)

    learner._accumulate_metric_vector = spy
    learner._env_steps = 3  # F = 1: three gradient steps due
    out = learner.train_on_episodes([])
    assert out.num_updates == 3
    module = {k: v.peek() for k, v in out.results[DEFAULT_MODULE_ID].items()}
    shared = {k: v.peek() for k, v in out.results["__all_modules__"].items()}
    batch_stats = [r for r in recorded if "mean_kl" in r]
    assert len(batch_stats) == 3
    for key in ("mean_kl", "zeroed_grad_fraction", "mean_rho", "policy_loss", "vf_loss"):
        assert module[key] == pytest.approx(np.mean([r[key] for r in batch_stats])), key
    assert np.isfinite(module["total_loss"])
    assert module["num_module_steps_trained"] == shared["num_env_steps_trained"] == 3 * B
    assert module["weights_seq_no"] == 3
    assert module["default_optimizer_learning_rate"] == pytest.approx(learner.refer.lr)
    assert shared["far_policy_fraction"] == learner.memory.far_fraction(learner.refer.c_max)
    assert shared["num_gradient_steps_lifetime"] == 3


@pytest.mark.parametrize("config_cls", [VRACERConfig, DDPGConfig, NAFConfig])
def test_checkpoint_round_trip_continues_identically(config_cls):
    """Weights, targets and the (fused) Adam state come back: the next step is the same."""
    learner = _fill(small_refer_learner(config_cls, train_batch_size_per_learner=B))
    for _ in range(2):
        learner._gradient_step()
    restored = small_refer_learner(config_cls, train_batch_size_per_learner=B)
    restored.set_state(learner.get_state())
    sample = learner.memory.sample(B)
    learner._update_on_sample(sample)
    restored._update_on_sample(sample)
    _assert_same_weights(learner, restored, rtol=0, atol=0)


def test_vracer_refreshes_v_of_s_T_with_the_pre_update_network():
    """V(s_T) of a truncated episode whose last step is sampled comes from the minibatch's forward
    pass (the network before the step), like the stored V(s_k)."""
    learner = small_refer_learner(VRACERConfig, train_batch_size_per_learner=B)
    rng = np.random.default_rng(5)
    ep = replay_episode(4, rng, d_s=3, d_a=2, terminated=False)
    learner.memory.add_episode(**ep, **{**learner._score_episode(ep), "v_boot": 123.0})
    module = learner._rl_module()
    with torch.no_grad():
        v_before = float(module.value_and_policy(torch.as_tensor(ep["obs"][-1:], dtype=torch.float32))[0])
    learner.memory.rng = np.random.default_rng(0)
    sample = learner.memory.sample(B)
    assert sample["truncated_last"].any()
    learner.memory.rng = np.random.default_rng(0)
    learner._gradient_step()
    stored = learner.memory.episode_bounds()[0][3]
    assert stored == pytest.approx(v_before, rel=1e-5, abs=1e-6)
    with torch.no_grad():
        v_after = float(module.value_and_policy(torch.as_tensor(ep["obs"][-1:], dtype=torch.float32))[0])
    assert v_after != v_before


def test_the_rllib_path_still_refreshes_v_of_s_T():
    """Through Learner.update (configurations the own step does not cover) V(s_T) is computed after the step."""
    learner = small_refer_learner(VRACERConfig, train_batch_size_per_learner=B)
    learner._uses_rllib_update = lambda: True
    rng = np.random.default_rng(5)
    ep = replay_episode(4, rng, d_s=3, d_a=2, terminated=False)
    learner.memory.add_episode(**ep, **{**learner._score_episode(ep), "v_boot": 123.0})
    learner._gradient_step()
    module = learner._rl_module()
    with torch.no_grad():
        v_after = float(module.value_and_policy(torch.as_tensor(ep["obs"][-1:], dtype=torch.float32))[0])
    assert learner.memory.episode_bounds()[0][3] == pytest.approx(v_after, rel=1e-5, abs=1e-6)


def test_vracer_appended_rows_leave_the_step_unchanged():
    """With truncated episodes the minibatch's forward pass carries extra s_T rows: the step's
    weights and stored ρ, V equal those of Learner.update's step (which has no extra rows)."""
    fast, rllib = _twins(VRACERConfig, terminated=False)
    rllib._uses_rllib_update = lambda: True
    seed = next(s for s in range(100) if fast.memory.gather(_draw(fast, s))["truncated_last"].any())
    fast.memory.rng, rllib.memory.rng = np.random.default_rng(seed), np.random.default_rng(seed)
    fast._gradient_step()
    rllib._gradient_step()
    _assert_same_weights(fast, rllib)
    for col in ("rho", "v"):
        np.testing.assert_allclose(fast.memory.column(col), rllib.memory.column(col), rtol=1e-5, atol=1e-6)


def _draw(learner, seed):
    return np.random.default_rng(seed).integers(learner.memory.head, learner.memory.tail, size=B)


@pytest.mark.parametrize("config_cls", [VRACERConfig, DDPGConfig, NAFConfig])
def test_compiled_step_equals_eager_step(config_cls):
    """Issue 42: the torch.compile'd forward + loss + backward (``compile_update``) against the eager step on
    the same minibatch: parameters after one step agree to 1e-5 relative / 1e-6 absolute (float32 kernels
    fused differently; Adam's first step is ±lr per weight), and the write-back's ρ, V and V(s_T) to 1e-5."""
    compiled = small_refer_learner(config_cls, train_batch_size_per_learner=B, compile_update=True)
    _fill(compiled, terminated=False)
    eager = small_refer_learner(config_cls, train_batch_size_per_learner=B, compile_update=False)
    eager.set_state(compiled.get_state())
    _fill(eager, terminated=False)
    ends = [start + length - 1 for start, length, *_ in compiled.memory.episode_bounds()]  # V(s_T) rows
    sample = compiled.memory.gather(np.r_[compiled.memory.sample(B - len(ends))["idx"], ends])
    assert sample["truncated_last"].sum() == len(ends)
    compiled._update_on_sample(sample)
    eager._update_on_sample(sample)
    assert hasattr(compiled._step_functions[DEFAULT_MODULE_ID], "_torchdynamo_orig_callable")  # no fallback
    _assert_same_weights(compiled, eager, rtol=1e-5, atol=1e-6)
    for key in compiled._stash:
        np.testing.assert_allclose(compiled._stash[key], eager._stash[key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_compile_failure_falls_back_to_the_eager_step_with_one_log_line(monkeypatch, caplog):
    """No C compiler (or any inductor failure): one warning, then the eager step, with its results."""
    import rllib_ext.common.refer.torch_learner as tl

    def broken_compile(fn, **kwargs):
        def call(*args):
            raise RuntimeError("InductorError: no working C compiler found\nmore lines")

        return call

    monkeypatch.setattr(tl.torch, "compile", broken_compile)
    a, b = _twins(VRACERConfig)
    a.config.compile_update = True  # a's step tries the broken compile, b's is eager
    sample = a.memory.sample(B)
    with caplog.at_level("WARNING", logger=tl.__name__):
        a._update_on_sample(sample)
        a._update_on_sample(sample)
    b._update_on_sample(sample)
    b._update_on_sample(sample)
    lines = [r for r in caplog.records if "compile_update" in r.getMessage()]
    assert len(lines) == 1 and "no working C compiler" in lines[0].getMessage()
    _assert_same_weights(a, b, rtol=0, atol=0)
