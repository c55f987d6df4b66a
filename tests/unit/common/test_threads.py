"""torch_num_threads reaches every learner that offers it (iterates over the registry)."""

from __future__ import annotations

import pytest

from rllib_ext import registry

NAMES = sorted(registry.ALGORITHMS)


@pytest.mark.parametrize("name", NAMES)
def test_torch_num_threads_setting_reaches_the_learner(name):
    """A config that offers ``torch_num_threads`` has a learner that applies it, before building."""
    import torch

    from rllib_ext.common.threads import TorchThreadsLearner

    config = registry.get_config_class(name)()
    if not hasattr(config, "torch_num_threads"):
        pytest.skip(f"{name} has no learner-side torch work to size")
    learner_cls = config.get_default_learner_class()
    assert issubclass(learner_cls, TorchThreadsLearner), learner_cls

    class Built:
        def build(self):
            self.threads_at_build = torch.get_num_threads()

    class Learner(TorchThreadsLearner, Built):
        pass

    before = torch.get_num_threads()
    learner = Learner()
    learner.config = config.training(torch_num_threads=1)
    try:
        torch.set_num_threads(3)  # not already 1, so the assertion below can fail
        learner.build()
        assert learner.threads_at_build == 1
    finally:
        torch.set_num_threads(before)
