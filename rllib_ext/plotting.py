"""Learning curves from Tune's ``progress.csv`` files (``rllib plot``)."""

from __future__ import annotations

import csv
import math
import os
from typing import Dict, List, Optional, Tuple

STEPS_COLUMN = "num_env_steps_sampled_lifetime"


def find_progress_files(run_dir: str) -> List[str]:
    """Every ``progress.csv`` under ``run_dir`` (an experiment dir or one trial dir), sorted."""
    found = []
    for root, _, files in os.walk(run_dir):
        if "progress.csv" in files and os.path.getsize(os.path.join(root, "progress.csv")) > 0:
            found.append(os.path.join(root, "progress.csv"))
    return sorted(found)


def read_curve(path: str, metric: str, x_column: str = STEPS_COLUMN) -> Tuple[List[float], List[float]]:
    """(x, y) pairs of one trial; rows where either value is missing or not finite are skipped.

    Raises:
        KeyError: ``metric`` is not a column of the file.
    """
    xs, ys = [], []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames or []
        if metric not in columns:
            raise KeyError(metric)
        x_col = x_column if x_column in columns else "training_iteration"
        for row in reader:
            try:
                x, y = float(row[x_col]), float(row[metric])
            except (TypeError, ValueError):
                continue
            if math.isfinite(x) and math.isfinite(y):
                xs.append(x)
                ys.append(y)
    return xs, ys


def plot_run(run_dir: str, out: Optional[str] = None, metric: str = "env_runners/episode_return_mean") -> str:
    """Writes a PNG with one line per trial (``metric`` vs env steps); returns its path.

    Raises:
        rllib_ext.cli.CLIError: No progress.csv under ``run_dir``, or none has ``metric``.
    """
    from rllib_ext.cli import CLIError

    run_dir = os.path.abspath(os.path.expanduser(run_dir))
    if not os.path.isdir(run_dir):
        raise CLIError(f"run directory does not exist: {run_dir}")
    files = find_progress_files(run_dir)
    if not files:
        raise CLIError(f"no progress.csv under {run_dir}")
    curves: Dict[str, Tuple[List[float], List[float]]] = {}
    for path in files:
        try:
            xs, ys = read_curve(path, metric)
        except KeyError:
            continue
        if xs:
            label = os.path.relpath(os.path.dirname(path), run_dir)
            curves[label if label != "." else os.path.basename(run_dir)] = (xs, ys)
    if not curves:
        raise CLIError(f"no values of {metric!r} in the {len(files)} progress.csv file(s) under {run_dir}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for label, (xs, ys) in sorted(curves.items()):
        ax.plot(xs, ys, label=label[:60])
    ax.set_xlabel("env steps")
    ax.set_ylabel(metric)
    ax.set_title(os.path.basename(run_dir))
    ax.grid(alpha=0.3)
    if len(curves) <= 12:
        ax.legend(fontsize=7)
    out = os.path.abspath(out or os.path.join(run_dir, "learning_curve.png"))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
