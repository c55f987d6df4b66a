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
    with pytest.raises(ValueError, match="cem_variance"):
        CEMRLConfig().environment("Pendulum-v1").training(cem_variance="printed").validate()
    # An unused black-box setting would be a silent no-op.
    with pytest.raises(ValueError, match="`episodes_per_job` = 3 has no effect in CEMRL_EXT .*black-box ES setting"):
        CEMRLConfig().environment("Pendulum-v1").training(episodes_per_job=3).validate()


def test_cemrl_defaults_to_the_reference_variance_and_passes_it_on():
    """The ``cem_variance`` setting reaches sep-CEM; the default is the reference codes' (1/K_e) form."""
    assert CEMRLConfig().cem_variance == "reference"
    assert CEMRLConfig().training(cem_variance="eq2").cem_variance == "eq2"
