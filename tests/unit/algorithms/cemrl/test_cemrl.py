"""CEMRLConfig: bad input is one clear error."""

import pytest

from rllib_ext.algorithms.cemrl.cemrl import CEMRLConfig


def test_cemrl_bad_input():
    with pytest.raises(ValueError, match="mode"):
        CEMRLConfig().environment("Pendulum-v1").training(mode="async").validate()
    with pytest.raises(ValueError, match="even"):
        CEMRLConfig().environment("Pendulum-v1").training(population_size=5).validate()
    with pytest.raises(ValueError, match="rl_population"):
        CEMRLConfig().environment("Pendulum-v1").training(rl_population=11).validate()
