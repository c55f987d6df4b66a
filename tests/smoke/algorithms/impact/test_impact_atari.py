"""IMPACT_EXT with paper 004's Atari setup (configs/impact_atari.yaml) builds and trains one iteration.

The config comes through the CLI's own loading (``--config @configs/impact_atari.yaml``), with a
tiny budget on top; the learning run (tuned_examples/impact_ext/pong-v5.yaml) is for a GPU
machine. Skipped without the ``atari`` extra (``pip install -e '.[atari]'``; ``make install`` has it).
"""

from __future__ import annotations

import os

import numpy as np
import torch
from torch import nn

from rllib_ext import cli, experiment
from tests.helpers import REPO, skip_without_env_extra

ATARI42 = "rllib_ext/Atari42-v0"
CONFIG_FILE = os.path.join(REPO, "configs", "impact_atari.yaml")

# A tiny budget: one runner, short fragments and train batches, one-second iterations.
TINY = {
    "num_env_runners": 1,
    "rollout_fragment_length": 25,
    "train_batch_size_per_learner": 50,
    "min_time_s_per_iteration": 1,
    "min_train_timesteps_per_iteration": 100,
}


def _atari_config():
    skip_without_env_extra(ATARI42)
    overrides = {**cli.parse_config_options(["@" + CONFIG_FILE]), **TINY}
    return experiment.build_config(experiment.resolve_algorithm("IMPACT_EXT"), ATARI42, overrides)


def test_paper_atari_setup_trains_one_iteration(ray_session):
    config = _atari_config()
    assert config.env_config["game"] == "ALE/Pong-v5" and config.clip_rewards is True
    algo = config.build_algo()
    try:
        result = algo.train()

        # The env runners' env: 4 stacked 42x42 grey frames.
        (obs_space,) = algo.env_runner_group.foreach_env_runner(
            lambda runner: runner.env.single_observation_space, local_env_runner=False
        )
        assert obs_space.shape == (42, 42, 4)

        # §4.3's network: three 4x4 and one 11x11 conv layers with ReLU, one torso for both heads.
        module = algo.learner_group._learner.module["default_policy"]
        assert module.observation_space.shape == (42, 42, 4)
        encoder = module.encoder
        assert encoder.config.shared and not hasattr(encoder, "critic_encoder")  # the critic shares the torso
        convs = [m for m in encoder.modules() if isinstance(m, nn.Conv2d)]
        assert [c.kernel_size for c in convs] == [(4, 4), (4, 4), (4, 4), (11, 11)]
        assert [c.out_channels for c in convs] == [16, 32, 32, 256]
        assert sum(isinstance(m, nn.ReLU) for m in encoder.modules()) == 4
        features = encoder({"obs": torch.zeros(2, 42, 42, 4)})["encoder_out"]
        assert features["actor"] is features["critic"]  # one forward pass feeds both heads
        assert tuple(features["critic"].shape) == (2, 256)  # 42 -> 21 -> 11 -> 11 -> 1x1x256
        assert module.pi.net.mlp[0].in_features == module.vf.net.mlp[0].in_features == 256  # linear heads

        learner = result["learners"]["default_policy"]
        assert np.isfinite(learner["total_loss"]) and np.isfinite(learner["vf_loss"])
        assert result["num_env_steps_sampled_lifetime"] > 0
    finally:
        algo.stop()
