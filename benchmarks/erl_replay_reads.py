"""Seconds per RL-individual actor step by how the replay is read (the ERL family's RL individuals).

An RL individual of AES-RL/CEM-RL trains its actor on its runner: `auto` = ~10k TD3 actor steps on
minibatches read from the shared replay actor in chunks of ``replay_sample_chunk`` (50). Two readers,
interleaved in one process against one replay actor holding ``--fill`` HalfCheetah-sized transitions:

- ``fetch when needed``: each chunk's ``sample`` call is made when the previous chunk is done, and
  returns every field (the reader before 2026-11-27, written out here);
- ``sample_chunks``: the package's reader (``rllib_ext.common.offpolicy.transitions.sample_chunks``), the
  next chunk's call in flight while the current one trains, states only (what an actor step uses).

``--others K`` adds K clients that sample the same replay every 0.1 s (other runners, the critic),
so that the replay actor has a queue. Each measurement is one JSON line in ``--out`` (default
``benchmarks/results/measurements/erl_replay_reads/<date>.jsonl``).

    python -m benchmarks.erl_replay_reads                     # K = 0 and 2, 400-300 actor, 3 pairs each
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import statistics
import time

import gymnasium as gym
import numpy as np
import ray
import torch

from rllib_ext.common.offpolicy.td3 import TD3Updater
from rllib_ext.common.offpolicy.transitions import ReplayActor, sample_chunks, writable
from rllib_ext.compare.rows import Machine, append_measurement, git_commit

READERS = ("fetch when needed (all fields)", "sample_chunks (states, next call in flight)")


@ray.remote(num_cpus=0)
def _other_client(replay, batch: int, chunk: int) -> None:
    while True:
        ray.get(replay.sample.remote(batch, num_batches=chunk))
        time.sleep(0.1)


def _train(reader: str, replay, upd: TD3Updater, steps: int, batch: int, chunk: int) -> float:
    """Seconds for ``steps`` actor steps read by ``reader``."""
    t0 = time.perf_counter()
    if reader == READERS[0]:
        done = 0
        while done < steps:
            n = min(chunk, steps - done)
            data = writable(ray.get(replay.sample.remote(batch, num_batches=n)))
            for i in range(n):
                upd.actor_step(data["obs"][i])
            done += n
    else:
        for n, data in sample_chunks(replay, batch, steps, chunk, ("obs",)):
            for i in range(n):
                upd.actor_step(data["obs"][i])
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--others", type=int, nargs="+", default=[0, 2], help="other clients sampling the replay")
    p.add_argument("--steps", type=int, default=2000, help="actor steps per measurement")
    p.add_argument("--repeats", type=int, default=3, help="pairs per K (order alternates)")
    p.add_argument("--hiddens", type=int, nargs="+", default=[400, 300])
    p.add_argument("--obs-dim", type=int, default=17)
    p.add_argument("--act-dim", type=int, default=6)
    p.add_argument("--fill", type=int, default=200_000)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--chunk", type=int, default=50)
    p.add_argument("--note", default="")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    torch.set_num_threads(1)
    date = datetime.date.today().isoformat()
    out = args.out or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "measurements", "erl_replay_reads", f"{date}.jsonl"
    )
    ray.init(num_cpus=max(args.others) + 2, include_dashboard=False, logging_level=logging.WARNING)
    rng = np.random.default_rng(0)
    replay = ReplayActor.remote(args.fill, args.obs_dim, args.act_dim, 0)
    for start in range(0, args.fill, 20_000):
        n = min(20_000, args.fill - start)
        ray.get(
            replay.add.remote(
                rng.normal(size=(n, args.obs_dim)),
                rng.uniform(-1, 1, (n, args.act_dim)),
                rng.normal(size=n),
                rng.normal(size=(n, args.obs_dim)),
                np.zeros(n, bool),
            )
        )
    space = gym.spaces.Box(-1.0, 1.0, (args.act_dim,), np.float32)
    upd = TD3Updater(args.obs_dim, space, hiddens=tuple(args.hiddens), seed=0)
    machine, code = Machine.this(), git_commit()
    for k in args.others:
        others = [_other_client.remote(replay, args.batch, args.chunk) for _ in range(k)]
        for reader in READERS:  # warm-up
            _train(reader, replay, upd, args.steps // 4, args.batch, args.chunk)
        ms = {r: [] for r in READERS}
        for repeat in range(args.repeats):
            for reader in READERS if repeat % 2 == 0 else READERS[::-1]:
                s = _train(reader, replay, upd, args.steps, args.batch, args.chunk)
                ms[reader].append(1000 * s / args.steps)
                row = {
                    "benchmark": "erl_replay_reads",
                    "reader": reader,
                    "others": k,
                    "hiddens": "x".join(map(str, args.hiddens)),
                    "batch": args.batch,
                    "chunk": args.chunk,
                    "steps": args.steps,
                    "repeat": repeat,
                    "ms_per_actor_step": ms[reader][-1],
                    "code": code,
                    "note": args.note,
                    "machine": {"cores": machine.cores, "description": machine.description},
                    "date": date,
                }
                append_measurement(out, row)
        for task in others:
            ray.cancel(task, force=True)
        a, b = (statistics.median(ms[r]) for r in READERS)
        print(f"K={k}: {READERS[0]} {a:.3f} ms/step, {READERS[1]} {b:.3f} ms/step, ratio {b / a:.3f}", flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
