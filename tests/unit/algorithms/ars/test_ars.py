"""ARS_EXT without Ray: the estimator of Algorithm 2 (steps 6-7) in closed form, and ARSConfig's checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rllib_ext import ARSConfig, cli, experiment
from rllib_ext.algorithms.ars.estimator import ars_gradient
from rllib_ext.common.blackbox.es_gradient import es_gradient
from rllib_ext.common.blackbox.samplers import make_sampler
from rllib_ext.optim import make_optimizer
from tests.builders import small_ars_config


def rows(*deltas):
    """The antithetic batch of the given directions: rows 2k = +δ_k, 2k+1 = −δ_k (float32)."""
    d = np.asarray(deltas, dtype=np.float32)
    out = np.empty((2 * len(d), d.shape[1]), dtype=np.float32)
    out[0::2], out[1::2] = d, -d
    return out


# Three directions with (r+, r−) = (5, 1), (2, 4), (0, 3): max(r+, r−) = 5, 4, 3.
DELTAS = ([1.0, 0.0], [0.0, 1.0], [1.0, 1.0])
RETURNS = np.array([5.0, 1.0, 2.0, 4.0, 0.0, 3.0])


# ------------------------------------------------------------------------------------------------
# The estimator.
# ------------------------------------------------------------------------------------------------
def test_top_b_by_max_return_sigma_over_the_2b_used_sign_and_scale():
    g, info = ars_gradient(RETURNS, rows(*DELTAS), top_b=2)
    # Step 6: directions 0 (max 5) and 1 (max 4, reached by r−) are kept; direction 2 has the
    # largest |r+ − r−| = 3 but the smallest max (3), and is dropped.
    sigma_r = np.std([5.0, 1.0, 2.0, 4.0])  # σ_R over the 2b = 4 returns used: sqrt(2.5)
    assert info["ars_sigma_r"] == pytest.approx(math.sqrt(2.5))
    assert info["ars_sigma_r"] != pytest.approx(np.std(RETURNS))  # not over all 2N
    # Step 7: 1/(b σ_R) [(5 − 1) δ_0 + (2 − 4) δ_1]
    np.testing.assert_allclose(g, np.array([4.0, -2.0]) / (2 * sigma_r), rtol=1e-6)
    assert g.dtype == np.float32
    assert info["ars_selected_fraction"] == pytest.approx(2 / 3)
    assert info["ars_selected_return_mean"] == pytest.approx(3.0)
    assert info["ars_cutoff_return"] == 4.0
    assert info["ars_zero_std_step"] == 0.0


def test_all_directions_reduce_to_the_antithetic_es_estimator_over_sigma_r():
    """b = N (V1/V2): ĝ = 1/(N σ_R) Σ (r+ − r−) δ_k, i.e. ES's Eq. 8 on the 2N rows with σ = 1/2
    (1/(σ·2N) Σ_i F_i ε_i) divided by the std of all 2N returns."""
    eps = make_sampler("antithetic", 7).sample(seed=3, n=10)
    returns = np.random.default_rng(0).normal(10.0, 3.0, size=10)
    g, info = ars_gradient(returns, eps, top_b=5)
    expected = es_gradient(returns, eps, 0.5).astype(np.float64) / np.std(returns)
    np.testing.assert_allclose(g, expected, rtol=1e-5)
    assert info["ars_selected_fraction"] == 1.0


def test_step_is_invariant_to_affine_rescaling_of_returns_and_flips_with_the_pairs():
    eps = rows(*DELTAS)
    g, _ = ars_gradient(RETURNS, eps, top_b=2)
    g_scaled, _ = ars_gradient(7.0 * RETURNS - 100.0, eps, top_b=2)
    np.testing.assert_allclose(g_scaled, g, rtol=1e-5)
    swapped = RETURNS.reshape(3, 2)[:, ::-1].ravel()  # r+ <-> r−: same maxima, same selection
    g_swapped, _ = ars_gradient(swapped, eps, top_b=2)
    np.testing.assert_allclose(g_swapped, -g, rtol=1e-6)


def test_ties_in_max_return_keep_the_lower_direction_index():
    returns = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 0.5])  # all three maxima are 1
    g, _ = ars_gradient(returns, rows(*DELTAS), top_b=1)
    sigma_r = np.std([1.0, 0.0])
    np.testing.assert_allclose(g, np.array([1.0, 0.0]) / sigma_r, rtol=1e-6)


def test_equal_returns_give_a_zero_step_not_nan():
    g, info = ars_gradient(np.full(6, 3.0), rows(*DELTAS), top_b=3)
    np.testing.assert_array_equal(g, np.zeros(2, dtype=np.float32))
    assert info["ars_sigma_r"] == 0.0 and info["ars_zero_std_step"] == 1.0


def test_sgd_step_with_lr_alpha_is_the_update_of_algorithm_2():
    """M_{j+1} = M_j + α/(b σ_R) Σ_{k≤b} [r(M+νδ_(k)) − r(M−νδ_(k))] δ_(k), written out literally."""
    rng = np.random.default_rng(1)
    n, b, d, alpha = 6, 3, 5, 0.02
    eps = make_sampler("antithetic", d).sample(seed=11, n=2 * n)
    returns = rng.normal(size=2 * n)
    theta = rng.normal(size=d).astype(np.float32)

    r_plus, r_minus, delta = returns[0::2], returns[1::2], eps[0::2].astype(np.float64)
    top = sorted(range(n), key=lambda k: -max(r_plus[k], r_minus[k]))[:b]
    sigma_r = np.std([r for k in top for r in (r_plus[k], r_minus[k])])
    expected = theta + alpha / (b * sigma_r) * sum((r_plus[k] - r_minus[k]) * delta[k] for k in top)

    g, _ = ars_gradient(returns, eps, top_b=b)
    param = torch.nn.Parameter(torch.tensor(theta))
    optimizer = make_optimizer("sgd", [param], lr=alpha)
    param.grad = -torch.tensor(g)  # the learner's convention: optimizers minimize, ĝ is ascent
    optimizer.step()
    np.testing.assert_allclose(param.detach().numpy(), expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    "returns,eps,top_b,match",
    [
        (RETURNS[:5], rows(*DELTAS)[:5], 1, "2N returns"),
        (RETURNS, rows(*DELTAS), 0, "top_b"),
        (RETURNS, rows(*DELTAS), 4, "top_b"),
        (RETURNS, rows(*DELTAS), 1.5, "top_b"),
        (RETURNS, np.ones((6, 2), np.float32), 1, "antithetic"),
    ],
)
def test_estimator_rejects_bad_batches(returns, eps, top_b, match):
    with pytest.raises(ValueError, match=match):
        ars_gradient(returns, eps, top_b)


# ------------------------------------------------------------------------------------------------
# ARSConfig.
# ------------------------------------------------------------------------------------------------
def test_defaults_are_ars_v2_with_a_linear_policy_plain_sgd_and_raw_returns():
    config = ARSConfig()
    assert (config.num_directions, config.top_directions, config.top_b) == (8, None, 8)
    assert config.episodes_per_batch == 16
    assert (config.lr, config.noise_stdev, config.optimizer) == (0.02, 0.03, "sgd")
    assert (config.policy_hiddens, config.policy_head, config.return_shaping) == ([], "linear", "none")
    assert (config.sampler, config.observation_filter, config.obs_clip) == ("antithetic", True, None)
    assert config.ars_version == "V2"


@pytest.mark.parametrize(
    "filter_on,top,version", [(False, None, "V1"), (False, 4, "V1-t"), (True, 8, "V2"), (True, 2, "V2-t")]
)
def test_version_names(filter_on, top, version):
    assert ARSConfig().training(observation_filter=filter_on, top_directions=top).ars_version == version


def test_num_directions_is_the_one_source_of_episodes_per_batch():
    config = ARSConfig().training(num_directions=5)
    assert config.episodes_per_batch == 10
    config = ARSConfig().training(episodes_per_batch=12)  # the engine's name sets N
    assert config.num_directions == 6
    small_ars_config(num_directions=3, episodes_per_batch=6).validate()  # consistent: fine
    clone = ARSConfig.from_state(ARSConfig().training(episodes_per_batch=6).get_state())  # build_algo's copy
    assert (clone.num_directions, clone.episodes_per_batch, clone._episodes_per_batch_given) == (3, 6, 6)


@pytest.mark.parametrize(
    "training,match",
    [
        ({"num_directions": 0}, "num_directions"),
        ({"num_directions": 2.5}, "num_directions"),
        ({"top_directions": 0}, "top_directions"),
        ({"top_directions": 5}, r"top_directions \(b\) must be .* \[1, num_directions=4\], got 5"),
        ({"top_directions": 1.5}, "top_directions"),
        ({"num_directions": 8, "episodes_per_batch": 10}, "episodes_per_batch=10 with num_directions=8"),
        ({"episodes_per_batch": 7}, "episodes_per_batch=7"),
        ({"episodes_per_batch": 0}, "episodes_per_batch=0"),
        ({"sampler": "orthogonal"}, "sampler='antithetic'.*got sampler='orthogonal'"),
        ({"sampler": "gcmc"}, "got sampler='gcmc'"),
        ({"sampler": "gaussian", "sampler_antithetic": True}, "got sampler='gaussian'"),
        ({"sampler_antithetic": False}, "sampler_antithetic=False"),
        ({"zero_init": "yes"}, "zero_init"),
        ({"noise_stdev": 0.0}, "noise_stdev"),
        ({"optimizer": "adamw"}, "optimizer"),
    ],
)
def test_invalid_settings_fail_validate_naming_the_setting(training, match):
    with pytest.raises(ValueError, match=match):
        small_ars_config(**training).validate()


def test_episodes_per_batch_set_then_other_num_directions_is_rejected():
    """Setting both (in either order, e.g. through RLlib's update_from_dict) must agree."""
    config = small_ars_config().update_from_dict({"episodes_per_batch": 16, "num_directions": 4})
    with pytest.raises(ValueError, match="episodes_per_batch=16 with num_directions=4"):
        config.validate()


def test_rllib_train_defaults_build_on_pendulum_without_ray():
    """`rllib train --algo ARS_EXT --env Pendulum-v1`: the defaults validate through the CLI's path."""
    algo_cls = experiment.resolve_algorithm("ARS_EXT")
    config = experiment.build_config(algo_cls, "Pendulum-v1", {})
    assert config.algo_class is algo_cls and config.episodes_per_batch == 16


def test_cli_rejects_too_many_top_directions_before_ray(capsys):
    rc = cli.main(["train", "--algo", "ARS_EXT", "--env", "Pendulum-v1", "--config", '{"top_directions": 9}'])
    assert rc == cli.USAGE_ERROR
    assert "top_directions" in capsys.readouterr().err
