"""DSGD (paper 000 Eq. 20–22) on scripted reward sequences; its state."""

from __future__ import annotations

import copy
import io
import math

import numpy as np
import pytest
import torch

from rllib_ext.optim import DSGD, make_optimizer
from tests.unit.optim.helpers import flat_params, make_params, num_scalars, set_random_grads


def test_dsgd_moves_eta_by_eps_times_eta0_by_default():
    """The authors' reading (distrib-rl's AdaptiveOmega): each update moves η by ε·η0, so Table 3's
    ε's take 25 improving updates from η0 to 0.23·η0 and 75 non-improving ones back."""
    params = make_params(6)
    opt = make_optimizer("dsgd", params, lr=0.01)
    assert opt.eps_units == "eta0"
    gen = torch.Generator().manual_seed(3)
    etas, reward = [], 1.0
    for _ in range(30):  # every reward beats ρ·R_avg
        reward *= 2.0
        opt.report_reward(reward)
        set_random_grads(params, gen)
        opt.step()
        etas.append(opt.eta_u)
    steps = -np.diff([0.01, *etas])
    assert steps[1:25] == pytest.approx(np.full(24, 0.0308 * 0.01), rel=1e-9)  # ε1·η0 per update
    assert etas[24] > 0.0023 and etas[25] == pytest.approx(0.0023)  # at the floor after 25 moves
    for _ in range(80):  # a flat reward (a return ceiling) never improves: back up by ε2·η0 per update
        opt.report_reward(1.0)
        set_random_grads(params, gen)
        opt.step()
        etas.append(opt.eta_u)
    up = np.diff(etas[30:])
    assert up[1:70] == pytest.approx(np.full(69, 0.01026 * 0.01), rel=1e-9)
    assert etas[30 + 74] < 0.01 and etas[30 + 76] == pytest.approx(0.01)  # ~75 moves back to η0


def test_dsgd_rejects_unknown_eps_units():
    with pytest.raises(ValueError, match="eps_units"):
        DSGD(make_params(2), eps_units="percent")


def test_dsgd_eta_follows_eq_21_on_a_scripted_reward_sequence():
    """η0 = 1, ε1 = 0.2, ε2 = 0.1, ρ = 1.5, M = 2: clip range [0.23, 1].

    The step of update u uses η_u; R(θ_u) then sets η_{u+1} (Eq. 21) against the mean of the
    previous M rewards (Eq. 20). Expected values computed by hand below.
    """
    params = make_params(5)
    opt = DSGD(params, lr=1.0, eps1=0.2, eps2=0.1, rho=1.5, M=2)
    d = num_scalars(params)
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
        set_random_grads(params, gen)
        before = flat_params(params)
        opt.step()
        step_norm = float((flat_params(params) - before).norm())
        assert math.isclose(step_norm, eta_used * math.sqrt(d), rel_tol=1e-9)  # Eq. (22)
        assert opt.eta_u == pytest.approx(eta_next, abs=1e-12)
        assert 0.23 - 1e-12 <= opt.eta_u <= 1.0 + 1e-12
    assert opt.u == len(script)
    assert opt.R_avg == pytest.approx(0.0)


def test_dsgd_literal_reading_with_paper_defaults_switches_between_bounds():
    """eps_units="absolute" (Eq. 21 as printed): Table 3's ε1 = 0.0308 and ε2 = 0.01026 exceed the
    clip range [0.0023, 0.01] of η0 = 0.01, so η jumps between the bounds."""
    params = make_params(6)
    opt = make_optimizer("dsgd", params, eps_units="absolute")
    assert (opt.eps1, opt.eps2, opt.rho, opt.param_groups[0]["lr"]) == (0.03080, 0.01026, 1.035, 0.01)
    gen = torch.Generator().manual_seed(7)
    etas = []
    for reward in (1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 1.0):
        opt.report_reward(reward)
        set_random_grads(params, gen)
        opt.step()
        etas.append(opt.eta_u)
    # M = 10, so R_avg is the mean of all earlier rewards here:
    # 1 (no history), 1 ≤ 1.035·1, 1 ≤ 1.035: +ε2 clipped at η0; 2 > 1.035, 2 > 1.035·1.25,
    # 2 > 1.035·1.4, 3 > 1.035·1.5: −ε1 clipped at 0.23·η0; 1 ≤ 1.035·1.71: back to η0.
    assert etas == pytest.approx([0.01, 0.01, 0.01, 0.0023, 0.0023, 0.0023, 0.0023, 0.01], abs=1e-15)


def test_dsgd_negative_rewards_need_a_real_improvement():
    """R_avg < 0: the test is R > R_avg + (ρ−1)|R_avg|, not the printed ρ·R_avg."""
    (p,) = make_params(7, shapes=((3,),))
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
    params = make_params(8)
    opt = DSGD(params, lr=1.0, eps1=0.2, eps2=0.1, rho=1.5, M=2)
    gen = torch.Generator().manual_seed(9)
    for reward in (1.0, 10.0):
        opt.report_reward(reward)
        set_random_grads(params, gen)
        opt.step()
    assert opt.eta_u == pytest.approx(0.8)
    opt.param_groups[0]["lr"] = 0.5  # a schedule lowers η0: η_u is re-clipped to [0.115, 0.5]
    set_random_grads(params, gen)
    before = flat_params(params)
    opt.step()
    assert math.isclose(
        float((flat_params(params) - before).norm()), 0.5 * math.sqrt(num_scalars(params)), rel_tol=1e-9
    )
    assert opt.eta_u == pytest.approx(0.5)


def test_dsgd_state_dict_round_trip():
    params = make_params(10)
    opt = DSGD(params, lr=1.0, eps1=0.2, eps2=0.1, rho=1.5, M=3)
    gen = torch.Generator().manual_seed(11)
    for reward in (1.0, 5.0, 4.0, 9.0):
        opt.report_reward(reward)
        set_random_grads(params, gen)
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
            for p, g in zip(ps, grads, strict=False):
                p.grad = g.clone()
            o.step()
        assert restored.eta_u == opt.eta_u
        assert torch.equal(flat_params(params), flat_params(clones))


def test_dsgd_controller_runs_on_a_zero_gradient():
    (p,) = make_params(13, shapes=((3,),))
    opt = DSGD([p], lr=1.0, eps1=0.2, eps2=0.1, rho=1.5, M=2)
    p.grad = torch.zeros(3, dtype=torch.float64)
    for reward in (1.0, 10.0):
        opt.report_reward(reward)
        opt.step()
    assert opt.eta_u == pytest.approx(0.8)
    assert opt.u == 2


def test_dsgd_state_dict_is_independent_of_later_steps():
    params = make_params(16)
    opt = DSGD(params, lr=1.0, eps1=0.2, eps2=0.1, rho=1.5, M=2)
    opt.report_reward(1.0)
    set_random_grads(params, torch.Generator().manual_seed(17))
    opt.step()
    snapshot = copy.deepcopy(opt.state_dict())
    state = opt.state_dict()
    opt.report_reward(5.0)
    opt.step()
    assert state == snapshot  # state_dict() returns a copy of the reward window, not a view
