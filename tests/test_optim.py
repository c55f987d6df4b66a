"""Optimizers of paper 000 §4 (SGD Eq. 2, MSGD Eq. 19, DSGD Eq. 20–22) and the registry."""

from __future__ import annotations

import copy
import io
import math

import pytest
import torch

from rllib_ext.optim import DSGD, MSGD, SGD, get_optimizer_class, make_optimizer


def _params(seed: int = 0, shapes=((7, 5), (5,), (3, 4, 2))) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*s, generator=gen, dtype=torch.float64)) for s in shapes]


def _set_random_grads(params, gen: torch.Generator) -> None:
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen, dtype=p.dtype)


def _flat(params) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in params]).clone()


def _dim(params) -> int:
    return sum(p.numel() for p in params)


# -- Appendix B: Adam's first update ------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_adam_first_update_has_norm_eta_sqrt_d(seed):
    """Paper 000 App. B: ‖θ_1 − θ_0‖ = η√d for any gradient.

    Why: with m_0 = v_0 = 0, after one step m_1 = (1−β1)g and v_1 = (1−β2)g²; Adam's bias
    corrections divide them by (1−β1) and (1−β2), so m̂ = g and v̂ = g², and the update is
    η·g/(|g| + ε) = ±η per element (ε = 1e-8 ≪ |g| here). d elements of size η: norm η√d.
    """
    params = _params(seed)
    gen = torch.Generator().manual_seed(100 + seed)
    _set_random_grads(params, gen)
    for p in params:  # keep |g| ≫ Adam's ε so the ±η elements are exact to ~1e-7 relative
        p.grad = torch.where(p.grad.abs() < 1e-2, torch.full_like(p.grad, 0.5), p.grad)
    opt = make_optimizer("adam", params)  # η = 0.01, β = (0.9, 0.999), ε = 1e-8 (Table 3)
    before = _flat(params)
    opt.step()
    step = _flat(params) - before
    eta, d = 0.01, _dim(params)
    assert torch.allclose(step.abs(), torch.full_like(step, eta), rtol=1e-6)  # every element ±η
    assert math.isclose(float(step.norm()), eta * math.sqrt(d), rel_tol=1e-6)
    grad = torch.cat([p.grad.reshape(-1) for p in params])
    assert torch.equal(torch.sign(step), -torch.sign(grad))  # minimizing: against the gradient


# -- SGD, Eq. (2) -------------------------------------------------------------------------------


def test_sgd_is_eq_2():
    params = _params(1)
    gen = torch.Generator().manual_seed(3)
    opt = make_optimizer("sgd", params, lr=0.05)
    assert isinstance(opt, SGD)
    for _ in range(3):
        _set_random_grads(params, gen)
        expected = [p.detach() - 0.05 * p.grad for p in params]  # Eq. (2), minimizing sign
        opt.step()
        for p, e in zip(params, expected):
            assert torch.allclose(p.detach(), e, rtol=0, atol=1e-15)


def test_es_ascent_convention():
    """An ascent estimate ĝ becomes param.grad = -ĝ: the step goes along +ĝ."""
    (p,) = _params(2, shapes=((4,),))
    g_hat = torch.tensor([1.0, -2.0, 0.5, 0.0], dtype=torch.float64)
    before = p.detach().clone()
    p.grad = -g_hat
    SGD([p], lr=0.1).step()
    assert torch.allclose(p.detach() - before, 0.1 * g_hat)


# -- MSGD, Eq. (19) -----------------------------------------------------------------------------


def test_msgd_every_step_has_norm_0_23_eta_sqrt_d():
    params = _params(3)
    # Two param groups with the same lr: d and ‖g‖ are taken over both groups jointly.
    opt = make_optimizer("msgd", [{"params": params[:2]}, {"params": params[2:]}], lr=0.02)
    assert isinstance(opt, MSGD)
    gen = torch.Generator().manual_seed(4)
    d = _dim(params)
    for scale in (1e-6, 1.0, 1e6, 3.0):  # the gradient's magnitude does not matter
        _set_random_grads(params, gen)
        for p in params:
            p.grad.mul_(scale)
        grad = torch.cat([p.grad.reshape(-1) for p in params])
        before = _flat(params)
        opt.step()
        step = _flat(params) - before
        assert math.isclose(float(step.norm()), 0.23 * 0.02 * math.sqrt(d), rel_tol=1e-9)
        assert torch.allclose(step / step.norm(), -grad / grad.norm(), atol=1e-12)  # along −g


def test_msgd_follows_lr_overwritten_by_a_schedule():
    params = _params(4)
    opt = MSGD(params, lr=0.01)
    opt.param_groups[0]["lr"] = 0.1  # what RLlib's TorchLearner does with an lr schedule
    _set_random_grads(params, torch.Generator().manual_seed(5))
    before = _flat(params)
    opt.step()
    assert math.isclose(float((_flat(params) - before).norm()), 0.23 * 0.1 * math.sqrt(_dim(params)), rel_tol=1e-9)


# -- DSGD, Eq. (20)–(22) ------------------------------------------------------------------------


def test_dsgd_eta_follows_eq_21_on_a_scripted_reward_sequence():
    """η0 = 1, ε1 = 0.2, ε2 = 0.1, ρ = 1.5, M = 2: clip range [0.23, 1].

    The step of update u uses η_u; R(θ_u) then sets η_{u+1} (Eq. 21) against the mean of the
    previous M rewards (Eq. 20). Expected values computed by hand below.
    """
    params = _params(5)
    opt = DSGD(params, lr=1.0, eps1=0.2, eps2=0.1, rho=1.5, M=2)
    d = _dim(params)
    script = [
        # (reward reported for update u, η_u used by step u, η_{u+1} after the step)
        (10.0, 1.0, 1.0),  # no history yet: unchanged
        (20.0, 1.0, 0.8),  # R_avg = 10, 20 > 15: improved, −ε1
        (20.0, 0.8, 0.9),  # R_avg = 15, 20 ≤ 22.5: +ε2
        (40.0, 0.9, 0.7),  # R_avg = 20 (window [20, 20]), 40 > 30
        (100.0, 0.7, 0.5),  # R_avg = 30, 100 > 45
        (200.0, 0.5, 0.3),  # R_avg = 70, 200 > 105
        (400.0, 0.3, 0.23),  # R_avg = 150, 400 > 225: 0.1 clipped up to 0.23·η0
        (10.0, 0.23, 0.33),  # R_avg = 300, 10 ≤ 450: +ε2
        (None, 0.33, 0.33),  # no report: unchanged
        (float("nan"), 0.33, 0.33),  # NaN (no episode finished): unchanged
        (1000.0, 0.33, 0.23),  # R_avg = 205 (window [400, 10]), 1000 > 307.5: 0.13 → 0.23
        (0.0, 0.23, 0.33),  # R_avg = 505
        (0.0, 0.33, 0.43),
        (0.0, 0.43, 0.53),
    ]
    gen = torch.Generator().manual_seed(6)
    for reward, eta_used, eta_next in script:
        if reward is not None:
            opt.report_reward(reward)
        _set_random_grads(params, gen)
        before = _flat(params)
        opt.step()
        step_norm = float((_flat(params) - before).norm())
        assert math.isclose(step_norm, eta_used * math.sqrt(d), rel_tol=1e-9)  # Eq. (22)
        assert opt.eta_u == pytest.approx(eta_next, abs=1e-12)
        assert 0.23 - 1e-12 <= opt.eta_u <= 1.0 + 1e-12
    assert opt.u == len(script)
    assert opt.R_avg == pytest.approx(0.0)


def test_dsgd_clips_at_eta0_and_paper_defaults_switch_between_bounds():
    """Table 3's ε1 = 0.0308 and ε2 = 0.01026 exceed the clip range [0.0023, 0.01] of η0 = 0.01."""
    params = _params(6)
    opt = make_optimizer("dsgd", params)
    assert (opt.eps1, opt.eps2, opt.rho, opt.param_groups[0]["lr"]) == (0.03080, 0.01026, 1.035, 0.01)
    gen = torch.Generator().manual_seed(7)
    etas = []
    for reward in (1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 1.0):
        opt.report_reward(reward)
        _set_random_grads(params, gen)
        opt.step()
        etas.append(opt.eta_u)
    # M = 10, so R_avg is the mean of all earlier rewards here:
    # 1 (no history), 1 ≤ 1.035·1, 1 ≤ 1.035: +ε2 clipped at η0; 2 > 1.035, 2 > 1.035·1.25,
    # 2 > 1.035·1.4, 3 > 1.035·1.5: −ε1 clipped at 0.23·η0; 1 ≤ 1.035·1.71: back to η0.
    assert etas == pytest.approx([0.01, 0.01, 0.01, 0.0023, 0.0023, 0.0023, 0.0023, 0.01], abs=1e-15)


def test_dsgd_negative_rewards_need_a_real_improvement():
    """R_avg < 0: the test is R > R_avg + (ρ−1)|R_avg|, not the printed ρ·R_avg."""
    (p,) = _params(7, shapes=((3,),))
    p.grad = torch.ones(3, dtype=torch.float64)
    opt = DSGD([p], lr=1.0, eps1=0.2, eps2=0.1, rho=1.5, M=1)
    opt.report_reward(-100.0)
    opt.step()  # first report: unchanged (1.0)
    opt.report_reward(-60.0)  # threshold −50: no improvement (printed rule: −60 > −150)
    opt.step()
    assert opt.eta_u == pytest.approx(1.0)  # +ε2, clipped at η0
    opt.report_reward(-40.0)  # R_avg = −60, threshold −30: not improved
    opt.step()
    assert opt.eta_u == pytest.approx(1.0)
    opt.report_reward(-10.0)  # R_avg = −40, threshold −20: improved
    opt.step()
    assert opt.eta_u == pytest.approx(0.8)
    opt.report_reward(0.0)  # R_avg = −10, threshold −5: improved
    opt.step()
    assert opt.eta_u == pytest.approx(0.6)
    opt.report_reward(0.0)  # R_avg = 0, threshold 0: not improved
    opt.step()
    assert opt.eta_u == pytest.approx(0.7)


def test_dsgd_lr_is_eta0_under_a_schedule():
    params = _params(8)
    opt = DSGD(params, lr=1.0, eps1=0.2, eps2=0.1, rho=1.5, M=2)
    gen = torch.Generator().manual_seed(9)
    for reward in (1.0, 10.0):
        opt.report_reward(reward)
        _set_random_grads(params, gen)
        opt.step()
    assert opt.eta_u == pytest.approx(0.8)
    opt.param_groups[0]["lr"] = 0.5  # a schedule lowers η0: η_u is re-clipped to [0.115, 0.5]
    _set_random_grads(params, gen)
    before = _flat(params)
    opt.step()
    assert math.isclose(float((_flat(params) - before).norm()), 0.5 * math.sqrt(_dim(params)), rel_tol=1e-9)
    assert opt.eta_u == pytest.approx(0.5)


def test_dsgd_state_dict_round_trip():
    params = _params(10)
    opt = DSGD(params, lr=1.0, eps1=0.2, eps2=0.1, rho=1.5, M=3)
    gen = torch.Generator().manual_seed(11)
    for reward in (1.0, 5.0, 4.0, 9.0):
        opt.report_reward(reward)
        _set_random_grads(params, gen)
        opt.step()
    opt.report_reward(2.0)  # pending at checkpoint time
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)  # a checkpoint: plain numbers, loadable with weights_only
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)

    clones = [torch.nn.Parameter(p.detach().clone()) for p in params]
    restored = DSGD(clones, lr=1.0, eps1=0.2, eps2=0.1, rho=1.5, M=3)
    restored.load_state_dict(saved)
    assert (restored.eta_u, restored.R_avg, restored.u) == (opt.eta_u, opt.R_avg, opt.u)
    assert restored.state_dict() == opt.state_dict()

    for reward in (None, 3.0, 30.0, 1.0):  # both continue identically
        grads = [torch.randn(p.shape, generator=gen, dtype=p.dtype) for p in params]
        for o, ps in ((opt, params), (restored, clones)):
            if reward is not None:
                o.report_reward(reward)
            for p, g in zip(ps, grads):
                p.grad = g.clone()
            o.step()
        assert restored.eta_u == opt.eta_u
        assert torch.equal(_flat(params), _flat(clones))


@pytest.mark.parametrize("name", ["sgd", "msgd", "dsgd"])
def test_zero_gradient_gives_no_nan_and_no_step(name):
    params = _params(12)
    opt = make_optimizer(name, params)
    before = _flat(params)
    for p in params:
        p.grad = torch.zeros_like(p)
    if name == "dsgd":
        opt.report_reward(1.0)
    opt.step()
    after = _flat(params)
    assert torch.isfinite(after).all()
    assert torch.equal(after, before)


def test_dsgd_controller_runs_on_a_zero_gradient():
    (p,) = _params(13, shapes=((3,),))
    opt = DSGD([p], lr=1.0, eps1=0.2, eps2=0.1, rho=1.5, M=2)
    p.grad = torch.zeros(3, dtype=torch.float64)
    for reward in (1.0, 10.0):
        opt.report_reward(reward)
        opt.step()
    assert opt.eta_u == pytest.approx(0.8)
    assert opt.u == 2


# -- the registry -------------------------------------------------------------------------------


def test_registry_classes_defaults_and_overrides():
    params = _params(14)
    assert get_optimizer_class("adam") is torch.optim.Adam
    assert get_optimizer_class("DSGD") is DSGD
    assert issubclass(get_optimizer_class("msgd"), torch.optim.Optimizer)
    adam = make_optimizer("adam", params)
    assert adam.defaults["lr"] == 0.01 and adam.defaults["betas"] == (0.9, 0.999) and adam.defaults["eps"] == 1e-8
    dsgd = make_optimizer("dsgd", params, lr=0.02, M=4)
    assert dsgd.param_groups[0]["lr"] == 0.02 and dsgd.M == 4 and dsgd.eps1 == 0.03080
    assert make_optimizer("msgd", params).param_groups[0]["lr"] == 0.01
    assert make_optimizer("sgd", params).param_groups[0]["lr"] == 0.01


def test_registry_unknown_name_is_a_clear_error():
    with pytest.raises(ValueError, match=r"'rmsprop'.*'adam', 'sgd', 'msgd', 'dsgd'"):
        make_optimizer("rmsprop", _params(15))
    with pytest.raises(ValueError, match="rho must be > 1"):
        make_optimizer("dsgd", _params(15), rho=0.9)


def test_dsgd_state_dict_is_independent_of_later_steps():
    params = _params(16)
    opt = DSGD(params, lr=1.0, eps1=0.2, eps2=0.1, rho=1.5, M=2)
    opt.report_reward(1.0)
    _set_random_grads(params, torch.Generator().manual_seed(17))
    opt.step()
    snapshot = copy.deepcopy(opt.state_dict())
    state = opt.state_dict()
    opt.report_reward(5.0)
    opt.step()
    assert state == snapshot  # state_dict() returns a copy of the reward window, not a view
