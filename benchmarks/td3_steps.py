"""Milliseconds per TD3 critic step and actor step, by device and network size: what binds them.

The ERL family (AES-RL, CEM-RL) spends its wall time in TD3 steps: the critic worker's critic
steps (on a GPU with ``critic_num_gpus``) and the RL individuals' actor steps (on the runners'
CPUs). On an H200 a 400-300 critic step took ≈ 3.7 ms inside a Table 1 run, about what one CPU
thread takes, so the GPU bought nothing there. This script times the steps alone, without Ray or
a replay (random minibatches, made on the device up front), for:

- each ``--device`` (default: ``cpu``, and ``cuda`` when there is one);
- each network in ``--nets`` (default ``400x300``, the paper's, and ``4x4``): a 4-unit network
  does almost no arithmetic, so its time per step is the floor set by launching the step's
  kernels from Python. Where the 400-300 step takes about as long as the 4-4 one, the step is
  bound by that dispatch, not by the arithmetic, and a larger batch or CUDA graphs would be the
  remedy; where it takes much longer, by the arithmetic.

- each Adam in ``--adams``: ``fused`` (TD3Updater's default since 2026-11-27: one kernel over all
  parameters) and ``loop`` (torch's per-tensor loop, the default before).

Critic steps run as the critic worker runs them (``TD3Updater.critic_steps``: chunks of
``--chunk`` minibatches, the target soft-updated after every step); actor steps as an RL
individual's (``TD3Updater.actor_step``, critic held fixed). CUDA timings synchronize the device
before reading the clock. Measurements are interleaved (device × network × Adam, order alternating per
repeat), after one warm-up pass each; torch uses ``--threads`` CPU threads (1, as the runners).
Each measurement is one JSON line in ``--out`` (default
``benchmarks/results/measurements/td3_steps/<date>.jsonl``).

    python -m benchmarks.td3_steps                          # cpu (+ cuda), 400x300 and 4x4, 3 repeats
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time

import gymnasium as gym
import numpy as np
import torch

from rllib_ext.common.offpolicy.td3 import TD3Updater
from rllib_ext.compare.rows import Machine, append_measurement, git_commit

#: Adam's implementations: TD3Updater's optimizer_kwargs for each.
ADAMS = {"fused": {}, "loop": {"foreach": False}}


def _nets(text: list[str]) -> list[tuple[int, ...]]:
    return [tuple(int(u) for u in net.split("x")) for net in text]


def _batches(n: int, batch: int, obs_dim: int, act_dim: int, device: torch.device, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    data = {
        "obs": torch.randn(n, batch, obs_dim, generator=g),
        "actions": torch.rand(n, batch, act_dim, generator=g) * 2 - 1,
        "rewards": torch.randn(n, batch, generator=g),
        "next_obs": torch.randn(n, batch, obs_dim, generator=g),
        "terminateds": torch.zeros(n, batch),
    }
    return {k: v.to(device) for k, v in data.items()}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(upd: TD3Updater, batches: dict, kind: str, steps: int, chunk: int) -> float:
    """Seconds per step of ``kind`` ("critic" or "actor") over ``steps`` steps."""
    n = batches["obs"].shape[0]
    _sync(upd.device)
    t0 = time.perf_counter()
    done = 0
    while done < steps:
        k = min(chunk, steps - done)
        start = done % max(n - k + 1, 1)
        if kind == "critic":
            upd.critic_steps({key: v[start : start + k] for key, v in batches.items()}, target_every=1)
        else:
            for i in range(start, start + k):
                upd.actor_step(batches["obs"][i])
        done += k
    _sync(upd.device)
    return (time.perf_counter() - t0) / steps


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--devices", nargs="+", default=None, help="default: cpu, and cuda when available")
    p.add_argument("--nets", nargs="+", default=["400x300", "4x4"], help="hidden sizes, e.g. 400x300")
    p.add_argument("--kinds", nargs="+", default=["critic", "actor"], choices=["critic", "actor"])
    p.add_argument("--adams", nargs="+", default=["fused"], choices=list(ADAMS))
    p.add_argument("--steps", type=int, default=1000, help="steps per measurement")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--chunk", type=int, default=50, help="minibatches per critic_steps call")
    p.add_argument("--obs-dim", type=int, default=17, help="HalfCheetah's")
    p.add_argument("--act-dim", type=int, default=6)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--note", default="")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    devices = args.devices or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    if any(d.startswith("cuda") for d in devices) and not torch.cuda.is_available():
        p.error("--devices names cuda, but torch sees no CUDA device here")
    torch.set_num_threads(args.threads)
    date = datetime.date.today().isoformat()
    out = args.out or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "measurements", "td3_steps", f"{date}.jsonl"
    )
    space = gym.spaces.Box(-1.0, 1.0, (args.act_dim,), np.float32)
    cases = []
    for device in map(torch.device, devices):
        for net in _nets(args.nets):
            batches = _batches(2 * args.chunk, args.batch, args.obs_dim, args.act_dim, device, seed=0)
            for adam in args.adams:
                upd = TD3Updater(
                    args.obs_dim,
                    space,
                    hiddens=net,
                    seed=0,
                    device=device,
                    policy_delay=1,
                    optimizer_kwargs=ADAMS[adam],
                )
                for kind in args.kinds:
                    time_steps(upd, batches, kind, args.chunk, args.chunk)  # warm-up (allocator, kernels)
                    cases.append((device, net, adam, kind, upd, batches))
    machine, code = Machine.this(), git_commit()
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else ""
    ms: dict[tuple, list[float]] = {}
    for repeat in range(args.repeats):
        for device, net, adam, kind, upd, batches in cases if repeat % 2 == 0 else cases[::-1]:
            value = 1000 * time_steps(upd, batches, kind, args.steps, args.chunk)
            key = (str(device), "x".join(map(str, net)), adam, kind)
            ms.setdefault(key, []).append(value)
            append_measurement(
                out,
                {
                    "benchmark": "td3_steps",
                    "device": key[0],
                    "gpu": gpu if device.type == "cuda" else "",
                    "hiddens": key[1],
                    "adam": adam,
                    "step": kind,
                    "batch": args.batch,
                    "chunk": args.chunk,
                    "steps": args.steps,
                    "threads": args.threads,
                    "repeat": repeat,
                    "ms_per_step": value,
                    "code": code,
                    "note": args.note,
                    "machine": {"cores": machine.cores, "description": machine.description},
                    "date": date,
                },
            )
    for (device, net, adam, kind), values in ms.items():
        median = statistics.median(values)
        print(f"{device:5s} {net:8s} {adam:6s} {kind:6s} {median:7.3f} ms/step (median of {len(values)})")


if __name__ == "__main__":
    main()
