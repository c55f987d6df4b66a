"""CVESConfig: validation and paper 002 §4 defaults."""

from __future__ import annotations

import pytest

from rllib_ext import CVESConfig
from rllib_ext.common.blackbox import BlackBoxEnvRunner
from tests.builders import small_cves_config


@pytest.mark.parametrize(
    "training,match",
    [
        ({"policy_head": "deterministic"}, "stochastic policy"),
        ({"explore_perturbations": False}, "stochastic policy"),
        ({"return_shaping": "rank"}, "return_shaping"),
        ({"gamma": 1.0}, "gamma"),
        ({"eta_lr": -1e-4}, "eta_lr"),
        ({"phi_num_perturbations": 5}, "phi_num_perturbations"),
        ({"phi_noise_stdev": 0.0}, "phi_noise_stdev"),
        ({"episodes_per_batch": 9}, "must be even"),
        ({"policy_head": "gaussian_2a"}, "not 'gaussian_2a'"),
        ({"gamma_max": 1.0}, "gamma_max"),
        ({"gamma": 0.999}, r"gamma_max=0.995"),
        ({"pg_baseline": "critic"}, "pg_baseline"),
    ],
)
def test_invalid_settings_fail_validate(training, match):
    with pytest.raises(ValueError, match=match):
        small_cves_config(**training).validate()


def test_runner_class_and_baseline_settings_validate():
    with pytest.raises(ValueError, match="CVESEnvRunner"):
        small_cves_config().env_runners(env_runner_cls=BlackBoxEnvRunner).validate()
    # The ES baseline switch accepts what the control variate cannot use.
    small_cves_config(control_variate=False, policy_head="deterministic", explore_perturbations=False).validate()


def test_defaults_are_paper_002_section_4():
    c = CVESConfig()
    assert (c.policy_hiddens, c.policy_activation, c.policy_head) == ([32, 32], "relu", "gaussian")
    assert (c.noise_stdev, c.lr, c.optimizer, c.episodes_per_batch, c.sampler) == (0.02, 0.01, "adam", 10, "antithetic")
    assert (c.phi_noise_stdev, c.phi_num_perturbations) == (0.02, 10)
    # γ frozen at gamma_max, where App. C.1's adaptation from the paper's 0.99 ends (cves_ext.md, Differences 4).
    assert (c.gamma, c.adapt_gamma, c.gamma_max) == (0.995, False, 0.995)
    assert c.observation_filter is False and c.return_shaping == "standardize"
