"""What the d-vector result of CVES costs: bytes per episode and runner time for ĝ^pg (paper 002 Eq. 5).

ES/DFD jobs return a few scalars per episode; a CVES job also returns J^γ and ĝ^pg,γ (float32,
d per discount factor: 1 with γ frozen, 1 + N_φ = 11 when γ is adapted, App. C.1). On one local
:class:`CVESEnvRunner` (no Ray; its ``run_jobs`` is what a remote call executes) this measures, per
episode of the §4 policy (2×32 ReLU, Gaussian head): the pickled size of one result (what Ray
ships), the wall time of the episode with and without the policy-gradient backprop, and the
resulting bytes per second of runner time.

    python benchmarks/cves_bandwidth.py --envs Pendulum-v1 Swimmer-v5 --episodes 10
"""

from __future__ import annotations

import argparse
import pickle
import time

import numpy as np

import rllib_ext  # noqa: F401 - registers the envs
from rllib_ext import CVESConfig
from rllib_ext.algorithms.cves.cves_env_runner import CVESEnvRunner, CVESPayload
from rllib_ext.common.blackbox import Call, PerturbationJob

MODES = [("ES (no CV)", None), ("CV, γ frozen (m=1)", 1), ("CV, γ adapted (m=11)", 11)]


def measure(env: str, episodes: int) -> list:
    config = CVESConfig().environment(env).debugging(seed=0)
    config.validate()
    runner = CVESEnvRunner(config=config)
    theta = runner.module.get_flat()
    rows = []
    for version, (label, m) in enumerate(MODES):
        gammas = None if m is None else np.linspace(0.99, 0.995, m)
        runner.adopt(version, CVESPayload(theta=theta, filter_state=runner.obs_filter.get_state(), gammas=gammas))
        jobs = tuple(PerturbationJob(id=i, version=version, seed=1, n=2 * episodes, index=i) for i in range(episodes))
        t0 = time.perf_counter()
        reply = runner.run_jobs(Call(payload_ref=None, jobs=jobs))
        wall = time.perf_counter() - t0
        steps = sum(r.length for r in reply.results)
        size = np.mean([len(pickle.dumps(r, protocol=5)) for r in reply.results])
        rows.append((env, theta.size, label, size, steps / episodes, wall / episodes * 1e3, size * episodes / wall))
    runner.stop()
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["Pendulum-v1", "Swimmer-v5"])
    parser.add_argument("--episodes", type=int, default=10)
    args = parser.parse_args(argv)
    print("| env | d | job | bytes / episode result | steps / episode | ms / episode | bytes / s of runner time |")
    print("|---|---|---|---|---|---|---|")
    for env in args.envs:
        base = None
        for env_, d, label, size, steps, ms, rate in measure(env, args.episodes):
            base = base or ms
            print(
                f"| {env_} | {d} | {label} | {size:,.0f} | {steps:.0f} | {ms:.1f} ({ms / base:.2f}×) | {rate / 1e3:,.1f} k |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
