"""Where the black-box driver spends its CPU per result: cProfile of ES_EXT or DFD_EXT training.

Runs one algorithm with R sleeping runners (``rllib_ext/VariableLength-v0``, 5–50 steps × 5 ms,
``policy_hiddens=[8]``, ``episodes_per_batch = 2R``: the settings of ``blackbox_scale.py``) on a
local Ray instance with R + 1 logical CPUs, trains ``--seconds`` after one warm-up iteration
under cProfile, and prints the driver's CPU seconds per result (``time.process_time``, Ray's own
driver threads included) and the top functions by own time. Profiling inflates the Python part;
read the split, not the absolute figure (``blackbox_scale.py`` measures that without a profiler).

    python benchmarks/blackbox_driver_profile.py --algo DFD_EXT --runners 16 --seconds 25
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import pstats
import time

import ray

import rllib_ext  # noqa: F401 - registers the algorithms and the env
from rllib_ext import DFDConfig, ESConfig


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", choices=["ES_EXT", "DFD_EXT"], default="DFD_EXT")
    parser.add_argument("--runners", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=25.0)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    ray.init(num_cpus=args.runners + 1, include_dashboard=False, logging_level=logging.WARNING)
    config_cls = DFDConfig if args.algo == "DFD_EXT" else ESConfig
    config = (
        config_cls()
        .environment("rllib_ext/VariableLength-v0", env_config={"min_len": 5, "max_len": 50, "step_sleep_s": 0.005})
        .env_runners(num_env_runners=args.runners)
        .training(policy_hiddens=[8], episodes_per_batch=2 * args.runners, eval_episodes=0)
        .debugging(seed=0)
    )
    algo = config.build_algo()
    try:
        algo.train()  # warm-up
        episodes0, cpu0, wall0 = algo.counters["episodes"], time.process_time(), time.perf_counter()
        profile = cProfile.Profile()
        profile.enable()
        while time.perf_counter() - wall0 < args.seconds:
            algo.train()
        profile.disable()
        results = algo.counters["episodes"] - episodes0
        cpu_ms = 1e3 * (time.process_time() - cpu0) / max(results, 1)
        rate = results / (time.perf_counter() - wall0)
        print(
            f"{args.algo}, {args.runners} runners: {results} results, {rate:.1f}/s, driver CPU {cpu_ms:.2f} ms/result"
        )
        pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
    finally:
        algo.stop()
        ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
