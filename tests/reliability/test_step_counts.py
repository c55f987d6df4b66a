"""The instrument: every env step a run simulates is in ``num_env_steps_sampled_lifetime``.

For every registered algorithm, an env wrapper (``rllib_ext/StepCounted-v0``) counts its own
``step()`` calls into files, across both env runners and the driver. After a few iterations the
reported total must equal that count: exactly for the synchronous algorithms, and for the
asynchronous ones (DFD, AES-RL, IMPACT) up to the work still in flight when ``train()`` returned,
which the test bounds from their settings. The breakdown (used / evaluation / wasted / pending)
must add up to the total. And the result has RLlib's layout: the learner's statistics under
``learners/<module_id>/`` (code written against RLlib's results reads them there).
"""

from __future__ import annotations

import pytest
from ray.rllib.core import DEFAULT_MODULE_ID

from rllib_ext.common.steps import BREAKDOWN_KEYS
from rllib_ext.envs import StepCounter
from tests.reliability.helpers import EPISODE_LENGTHS, NAMES, VAR_ENV, small_config

ITERATIONS = 3
RUNNERS = 2
#: Algorithms that keep their runners busy between iterations (work in flight when train() returns).
ASYNCHRONOUS = {"DFD_EXT", "AESRL_EXT", "IMPACT_EXT"}


def in_flight_bound(name: str, config, runners: int = RUNNERS) -> int:
    """The most env steps that can be simulated but not yet reported when ``train()`` returns."""
    longest = EPISODE_LENGTHS["max_len"]
    if name == "IMPACT_EXT":  # RLlib's async sample requests: one fragment per env per request
        per_request = config.get_rollout_fragment_length() * config.num_envs_per_env_runner
        # An episode chunk may add a step beyond the fragment at its end (RLlib's lookback).
        return runners * config.max_requests_in_flight_per_env_runner * (per_request + 1)
    calls = runners * config.jobs_in_flight_per_env_runner
    if isinstance(config.perturbations_per_call, int):
        jobs_per_call = config.perturbations_per_call
    else:  # sized by work: the calls in flight hold about one batch (BlackBoxAlgorithm.call_size)
        jobs_per_call = max(4, -(-int(getattr(config, "episodes_per_batch", 4)) // calls))
    episodes = max(int(getattr(config, "episodes_per_job", 1)), int(getattr(config, "mean_eval_episodes", 1)))
    return calls * max(jobs_per_call, 1) * episodes * longest


def train_counted(name: str, env_config: dict, runners: int):
    """(config, last result) of ``ITERATIONS`` iterations of ``name`` on ``rllib_ext/StepCounted-v0``."""
    config = small_config(name, env="rllib_ext/StepCounted-v0", env_config=env_config, num_env_runners=runners)
    algo = config.build_algo()
    try:
        for _ in range(ITERATIONS):
            result = algo.train()
    finally:
        algo.stop()
    return config, result


@pytest.mark.parametrize("name", NAMES)
def test_reported_env_steps_equal_the_steps_the_envs_took(ray_session, tmp_path, name):
    count_dir = str(tmp_path / "steps")
    config, result = train_counted(name, {"env": VAR_ENV, "count_dir": count_dir}, RUNNERS)
    assert DEFAULT_MODULE_ID in result.get("learners", {}), f"{name}: no learners/{DEFAULT_MODULE_ID}/ in the result"
    runners = result["env_runners"]
    reported = runners["num_env_steps_sampled_lifetime"]
    simulated = StepCounter.total(count_dir)
    assert reported > 0
    assert result.get("num_env_steps_sampled_lifetime", reported) == reported
    parts = {key: runners.get(key) for key in BREAKDOWN_KEYS}
    assert None not in parts.values(), f"{name}: breakdown missing: {parts}"
    assert sum(parts.values()) == reported, f"{name}: breakdown {parts} does not add up to {reported}"
    assert parts["env_steps_used_lifetime"] > 0
    if name in ASYNCHRONOUS:
        bound = in_flight_bound(name, config)
        assert reported <= simulated <= reported + bound, (
            f"{name}: reported {reported}, the envs simulated {simulated} (in flight at most {bound})"
        )
    else:
        assert reported == simulated, f"{name}: reported {reported}, the envs simulated {simulated}"


@pytest.mark.parametrize(
    ("name", "fault"),
    [("ES_EXT", "raise"), ("TD3_EXT", "raise"), ("VRACER_EXT", "nan_reward"), ("IMPACT_EXT", "raise")],
)
def test_failed_episodes_count_up_to_their_failure(ray_session, tmp_path, name, fault):
    """An env that fails mid-episode: its steps up to the failure are counted, and booked as wasted
    (RLlib 2.60's runner drops them from its own count; ``FiniteSingleAgentEnvRunner`` keeps them)."""
    count_dir = str(tmp_path / "steps")
    env_config = {"env": "rllib_ext/Faulty-v0", "count_dir": count_dir, "fault": fault, "fault_prob": 0.3}
    # IMPACT samples on the driver's own runner here (synchronous, so the count is exact): with
    # failures a sample() call runs on until it has a fragment of good steps, so the work in
    # flight on remote runners has no bound to test against.
    _, result = train_counted(name, env_config, runners=0 if name == "IMPACT_EXT" else 1)
    runners = result["env_runners"]
    assert runners["num_env_steps_sampled_lifetime"] == StepCounter.total(count_dir)
    assert runners["env_steps_wasted_lifetime"] > 0
