"""The ERL env runner's job protocol (common/erl/env_runner.py) with a replay actor."""

import numpy as np
import ray
import torch

from rllib_ext.common.erl.population import gaussian_individual
from tests.builders import small_aesrl_config


def test_runner_regenerates_individuals_and_fills_replay(ray_session):
    from rllib_ext.common.blackbox import Call, EvaluationJob, IndividualJob
    from rllib_ext.common.erl.env_runner import ERLEnvRunner
    from rllib_ext.common.erl.protocol import ERLPayload
    from rllib_ext.common.offpolicy.transitions import ReplayActor

    cfg = small_aesrl_config()
    runner = ERLEnvRunner(config=cfg)
    mu = runner.module.get_flat()
    var = np.full_like(mu, 1e-2)
    replay = ReplayActor.remote(1000, 3, 1, 0)
    payload = ray.put(ERLPayload(theta=mu, var=var, replay=replay))
    jobs = (IndividualJob(id=0, version=1, seed=5), EvaluationJob(id=1, version=1, episodes=2))
    es, mean = runner.run_jobs(Call(payload_ref=payload, jobs=jobs)).results
    assert es.params is None and es.length == 200 and np.isfinite(es.ret)  # a seed in, a scalar out
    assert isinstance(mean.job, EvaluationJob) and len(mean.returns) == 2 and mean.length == 400
    # The runner evaluated exactly the z the driver regenerates from (mu, var, seed).
    runner.module.set_flat(gaussian_individual(mu, var, 5))
    z = runner.module.get_flat()
    assert np.array_equal(z, gaussian_individual(mu, var, 5))
    assert ray.get(replay.size.remote()) == 200  # the individual's episode only, not the mean's
    # An RL individual: trained against critic weights, its new parameters come back.
    from rllib_ext.common.offpolicy.td3 import TwinCritic

    torch.manual_seed(0)
    twin = TwinCritic(3, 1, (24, 24))
    critic = {k: v.numpy() for k, v in twin.state_dict().items()}
    job = IndividualJob(id=2, version=1, seed=6, rl_steps=20, critic_ref=[ray.put(critic)])
    (rl,) = runner.run_jobs(Call(payload_ref=payload, jobs=(job,))).results
    z6 = gaussian_individual(mu, var, 6)
    assert rl.rl and rl.params.shape == mu.shape and not np.allclose(rl.params, z6)
    assert np.isfinite(rl.actor_loss)
    # It took exactly rl_steps actor steps (Algorithm 2's RL individual), and ascended Q1 of the
    # critic it was given: the mean Q1(s, π(s)) over replay states is higher for the trained
    # parameters than for the z it started from.
    assert runner._td3().num_actor_steps == 20
    obs = torch.as_tensor(ray.get(replay.sample.remote(200, num_batches=1))["obs"][0], dtype=torch.float32)

    def mean_q1(params):
        runner.module.set_flat(params)
        with torch.no_grad():
            return float(twin.q1(obs, runner.module.policy.deterministic_action(obs)).mean())

    assert mean_q1(rl.params) > mean_q1(z6)
    runner.stop()
