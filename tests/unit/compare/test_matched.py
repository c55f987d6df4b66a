"""rllib_ext.compare.matched: APPO and PPO given an IMPACT_EXT config in their own units (paper 004 §3.2, §4.1.1)."""

from __future__ import annotations

import pytest

from rllib_ext.compare import matched

#: Paper 004 Table 1 (discrete control): N = 4, K = 2, M = 500; lr, ε, KL as IMPACT_EXT's defaults.
IMPACT = {
    "circular_buffer_num_batches": 4,
    "circular_buffer_iterations_per_batch": 2,
    "train_batch_size_per_learner": 500,
    "target_network_update_freq": None,
    "lr": 5e-4,
    "clip_param": 0.3,
    "use_kl_loss": True,
    "kl_coeff": 0.2,
    "kl_target": 0.01,
    "gamma": 0.99,
    "lambda_": 0.995,
    "vf_loss_coeff": 1.0,
    "entropy_coeff": 0.01,
    "tau": 1.0,
    "grad_clip": 10.0,
    "grad_clip_by": "global_norm",
}


def test_appo_gets_n_k_m_and_the_target_period_in_its_units():
    appo = matched.appo_from_impact(IMPACT)
    assert appo["circular_buffer_num_batches"] == 4 and appo["circular_buffer_iterations_per_batch"] == 2
    assert appo["train_batch_size_per_learner"] == 500 and appo["use_circular_buffer"] is True
    # IMPACT_EXT syncs every n = N·K = 8 updates; APPO every freq·N·K·M trained steps = 8 updates of M steps.
    assert appo["target_network_update_freq"] == 1.0
    for key in ("lr", "clip_param", "use_kl_loss", "kl_coeff", "kl_target", "gamma", "tau", "grad_clip"):
        assert appo[key] == IMPACT[key], key
    assert "lambda_" not in appo  # APPO's lambda_ applies without V-trace only


def test_an_explicit_target_period_in_learner_updates_becomes_a_fraction_of_n_k():
    appo = matched.appo_from_impact({**IMPACT, "target_network_update_freq": 32})
    assert appo["target_network_update_freq"] == 4.0  # 32 updates = 4 · (N·K) updates
    assert matched.appo_from_impact({**IMPACT, "target_network_update_freq": 6})["target_network_update_freq"] == 0.75


def test_ppo_gets_train_batch_n_m_minibatch_m_and_k_epochs():
    ppo = matched.ppo_from_impact(IMPACT)
    assert (ppo["train_batch_size_per_learner"], ppo["minibatch_size"], ppo["num_epochs"]) == (2000, 500, 2)
    assert ppo["lambda_"] == 0.995 and ppo["lr"] == 5e-4 and ppo["kl_coeff"] == 0.2
    # The same K/M updates per env step: N·K minibatch updates per N·M env steps.
    assert ppo["num_epochs"] * ppo["train_batch_size_per_learner"] // ppo["minibatch_size"] == 4 * 2
    with pytest.raises(matched.MatchError, match=r"n = N·K = 8.*target_network_update_freq = 16"):
        matched.ppo_from_impact({**IMPACT, "target_network_update_freq": 16})
    assert matched.ppo_from_impact({**IMPACT, "target_network_update_freq": 8})["num_epochs"] == 2


def test_the_mapping_reads_a_built_impact_config_with_its_defaults():
    from rllib_ext import IMPACTConfig

    config = IMPACTConfig().training(circular_buffer_num_batches=16, circular_buffer_iterations_per_batch=20, lr=3e-4)
    values, paper = matched.matched_settings("APPO", "IMPACT_EXT", config)
    assert paper.startswith("paper 004 §3.2")
    assert values["circular_buffer_num_batches"] == 16 and values["circular_buffer_iterations_per_batch"] == 20
    assert values["train_batch_size_per_learner"] == config.train_batch_size_per_learner
    assert values["target_network_update_freq"] == 1.0 and values["lr"] == 3e-4
    assert values["clip_param"] == config.clip_param and values["kl_coeff"] == config.kl_coeff


def test_a_pair_without_a_paper_mapping_is_refused():
    with pytest.raises(matched.MatchError, match="no matched mapping from IMPACT_EXT to IMPALA"):
        matched.matched_settings("IMPALA", "IMPACT_EXT", IMPACT)
    with pytest.raises(matched.MatchError, match="lack circular_buffer_num_batches"):
        matched.appo_from_impact({"lr": 1.0})
