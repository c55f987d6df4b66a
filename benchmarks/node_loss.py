"""Node loss (issue #9): remove a worker node of a 3-node cluster during a run; the run must finish.

A ``ray.cluster_utils.Cluster`` with a head and two worker nodes, 1 CPU each, on this machine.
The algorithm runs with 2 env runners (one per worker node, placed by a custom resource); after
``--before`` iterations one worker node is removed (its raylet and every actor on it die), and the
run goes on for ``--after`` iterations. Reported per algorithm: whether the run finished, the
iterations and env steps before/after, and the lost/restarted-runner counters the algorithm logged.

    python benchmarks/node_loss.py --algos DFD_EXT IMPACT_EXT AESRL_EXT
"""

from __future__ import annotations

import argparse
import logging
import time

import ray
from ray.cluster_utils import Cluster

SETTINGS = {
    "DFD_EXT": ("CartPole-v1", {"episodes_per_batch": 8, "policy_hiddens": [16, 16], "eval_episodes": 0}),
    "ES_EXT": ("CartPole-v1", {"episodes_per_batch": 8, "policy_hiddens": [16, 16]}),
    "IMPACT_EXT": ("CartPole-v1", {}),
    "AESRL_EXT": (
        "Pendulum-v1",
        {
            "policy_hiddens": [16, 16],
            "critic_hiddens": [16, 16],
            "initial_steps": 400,
            "rl_actor_steps": 50,
            "fixed_range": 250.0,
            "fitness_baseline": 250.0,
            "mean_eval_episodes": 1,
        },
    ),
}


def env_steps(result) -> int:
    return int(result.get("env_runners", {}).get("num_env_steps_sampled_lifetime", 0))


def run(name: str, before: int, after: int, remove_node) -> dict:
    """Trains ``before`` iterations, calls ``remove_node()``, trains ``after`` more."""
    import rllib_ext  # noqa: F401 - registers the algorithms (again after init)
    from rllib_ext import registry

    env, overrides = SETTINGS[name]
    config = registry.get_config_class(name)().environment(env)
    config.env_runners(num_env_runners=2, custom_resources_per_env_runner={"runner_slot": 1})
    config.update_from_dict(dict(overrides))
    config.fault_tolerance(restart_failed_env_runners=True)
    algo = config.build_algo()
    out = {"algo": name, "finished": False}
    try:
        for _ in range(before):
            result = algo.train()
        out["steps_before"] = env_steps(result)
        remove_node()
        t0 = time.perf_counter()
        for _ in range(after):
            result = algo.train()
        out.update(
            steps_after=env_steps(result),
            iters=result["training_iteration"],
            after_s=time.perf_counter() - t0,
            healthy_runners=algo.env_runner_group.num_healthy_remote_workers(),
            finished=True,
        )
        bb = result.get("blackbox", {})
        for key in ("runner_calls_lost_lifetime", "jobs_requeued_lifetime"):
            if key in bb:
                out[key] = bb[key]
        out["env_runner_restarts"] = algo.env_runner_group.num_remote_worker_restarts()
    except Exception as e:  # noqa: BLE001 - reported, not hidden
        out["error"] = f"{type(e).__name__}: {e}"[:300]
    finally:
        algo.stop()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", default=["DFD_EXT", "IMPACT_EXT"], choices=list(SETTINGS))
    parser.add_argument("--before", type=int, default=3)
    parser.add_argument("--after", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for name in args.algos:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        workers = [cluster.add_node(num_cpus=1, resources={"runner_slot": 1}) for _ in range(2)]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level=logging.WARNING)
        try:
            rows.append(
                run(
                    name,
                    args.before,
                    args.after,
                    lambda cluster=cluster, workers=workers: cluster.remove_node(workers[1]),
                )
            )
        finally:
            ray.shutdown()
            cluster.shutdown()
        print(rows[-1], flush=True)
    print(
        "\n| algorithm | finished | iterations | env steps before -> after removal | runners healthy at end | counters |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        counters = {
            k: r[k] for k in ("runner_calls_lost_lifetime", "jobs_requeued_lifetime", "env_runner_restarts") if k in r
        }
        print(
            f"| {r['algo']} | {r['finished']} {r.get('error', '')} | {r.get('iters', '-')} | "
            f"{r.get('steps_before', '-')} -> {r.get('steps_after', '-')} | {r.get('healthy_runners', '-')} | {counters} |"
        )


if __name__ == "__main__":
    main()
