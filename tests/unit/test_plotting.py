"""rllib_ext.plotting on hand-made Tune trial directories (result.json, progress.csv, event files)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from rllib_ext import cli, plotting

RET = plotting.RETURN_KEY


def write_trial(path, rows, result_json=True, progress_csv=True):
    """A Tune trial dir: result.json with every row; progress.csv with the first row's columns only."""
    path.mkdir(parents=True, exist_ok=True)
    flat = [plotting.flatten(r) for r in rows]
    if result_json:
        with open(path / "result.json", "w") as f:
            for r in rows:
                f.write(json.dumps({**r, "config": {"lr": 0.1}}) + "\n")
    if progress_csv:
        columns = list(flat[0])  # Tune fixes the columns at the first result
        with open(path / "progress.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(flat)
    return str(path)


def result(i, steps, ret=None, time_s=None):
    runners = {"num_env_steps_sampled_lifetime": steps}
    if ret is not None:
        runners["episode_return_mean"] = ret
    return {
        "training_iteration": i,
        "num_env_steps_sampled_lifetime": steps,
        "time_total_s": time_s if time_s is not None else float(i),
        "env_runners": runners,
        "done": False,
        "trial_id": "abc",
    }


def impact_like_trial(path, offset=0.0):
    # First iteration: no finished episode, so no return (progress.csv then never has the column).
    rows = [result(1, 100), result(2, 200, 20.0 + offset), result(3, 300, 40.0 + offset)]
    return write_trial(path, rows)


def test_flatten_keeps_finite_numbers_with_slash_keys():
    flat = plotting.flatten({"a": {"b": 1, "c": "x", "d": float("nan")}, "e": True, "f": 2.5})
    assert flat == {"a/b": 1.0, "f": 2.5}


def test_a_metric_missing_from_the_first_row_is_read_from_result_json(tmp_path):
    run = tmp_path / "cartpole-impact"
    trial = impact_like_trial(run / "IMPACT_EXT_CartPole-v1_0")
    with open(f"{trial}/progress.csv") as f:
        assert RET not in f.readline()  # the bug: progress.csv alone has no such column
    series, x_key = plotting.build_series([str(run)])
    assert x_key == "num_env_steps_sampled_lifetime"
    (s,) = series
    np.testing.assert_array_equal(s.xs, [200, 300])
    np.testing.assert_array_equal(s.ys, [20.0, 40.0])
    assert s.label == "IMPACT_EXT_CartPole-v1_0" and s.marker == "o"
    # progress.csv on its own cannot: a clear error naming what was read.
    with pytest.raises(ValueError, match=r"no values of 'env_runners/episode_return_mean' .*progress\.csv"):
        plotting.build_series([str(run)], source="progress.csv")


def test_progress_csv_is_the_fallback(tmp_path):
    rows = [result(i, 100 * i, 10.0 * i) for i in range(1, 4)]
    trial = write_trial(tmp_path / "run" / "t0", rows, result_json=False)
    assert plotting.read_trial(trial).source == "progress.csv"
    (s,), _ = plotting.build_series([str(tmp_path / "run")])
    np.testing.assert_array_equal(s.ys, [10.0, 20.0, 30.0])


def test_a_single_point_run_is_drawn_with_a_marker(tmp_path):
    run = tmp_path / "one"
    write_trial(run, [result(1, 100, 5.0)])
    (s,), _ = plotting.build_series([str(run)])
    assert s.xs.size == 1 and s.marker == "o" and s.label == "one"
    out = plotting.plot_runs([str(run)])
    assert out == str(run / "learning_curve.png")


def test_long_curves_have_no_markers(tmp_path):
    run = tmp_path / "long"
    write_trial(run, [result(i, 10 * i, float(i)) for i in range(1, 60)])
    (s,), _ = plotting.build_series([str(run)])
    assert s.marker is None


def test_several_directories_are_groups_with_mean_and_ci(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for k in range(3):
        impact_like_trial(a / f"trial_{k}", offset=k)
        impact_like_trial(b / f"trial_{k}", offset=100 + k)
    series, _ = plotting.build_series([str(a), str(b)])
    assert [s.label for s in series] == ["a (mean of 3 trials)", "b (mean of 3 trials)"]
    sa = series[0]
    np.testing.assert_allclose(sa.ys, [21.0, 41.0])
    assert np.all(sa.low <= sa.ys) and np.all(sa.ys <= sa.high) and np.all(sa.high > sa.low)
    (iqm,), _ = plotting.build_series([str(a)], aggregate="iqm")
    np.testing.assert_allclose(iqm.ys, [21.0, 41.0])
    out = plotting.plot_runs([str(a), str(b)], out=str(tmp_path / "groups.png"))
    assert open(out, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_x_axis_choices(tmp_path):
    run = tmp_path / "r"
    write_trial(run, [result(i, 100 * i, float(i), time_s=2.0 * i) for i in range(1, 4)])
    (s,), key = plotting.build_series([str(run)], x="time")
    assert key == "time_total_s"
    np.testing.assert_array_equal(s.xs, [2.0, 4.0, 6.0])
    with pytest.raises(ValueError, match="x must be one of"):
        plotting.build_series([str(run)], x="furlongs")


def test_errors_are_plain_exceptions_with_the_closest_keys(tmp_path):
    with pytest.raises(FileNotFoundError, match="run directory does not exist"):
        plotting.build_series([str(tmp_path / "nope")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no result.json, progress.csv or event files"):
        plotting.build_series([str(tmp_path / "empty")])
    run = tmp_path / "r"
    impact_like_trial(run)
    with pytest.raises(ValueError, match="closest reported keys: env_runners/episode_return_mean"):
        plotting.build_series([str(run)], metric="env_runners/episode_return_men")


def test_a_cut_off_last_line_of_result_json_is_skipped(tmp_path):
    trial = tmp_path / "t"
    impact_like_trial(trial)
    with open(trial / "result.json", "a") as f:
        f.write('{"training_iteration": 4, "num_env')
    assert len(plotting.read_result_json(str(trial / "result.json"))) == 3
    with open(trial / "result.json", "a") as f:
        f.write("\n" + json.dumps(result(5, 500, 1.0)) + "\n")
    with pytest.raises(ValueError, match=r"result\.json:4: not JSON"):
        plotting.read_result_json(str(trial / "result.json"))


def test_event_files_are_read_when_asked(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    trial = tmp_path / "tb"
    writer = SummaryWriter(str(trial))
    for i in range(1, 4):
        writer.add_scalar("ray/tune/num_env_steps_sampled_lifetime", 100 * i, global_step=i)
        writer.add_scalar("ray/tune/training_iteration", i, global_step=i)
        if i > 1:
            writer.add_scalar(f"ray/tune/{RET}", 10.0 * i, global_step=i)
    writer.close()
    assert plotting.read_trial(str(trial)).source == "tfevents"  # no result.json, no progress.csv
    (s,), _ = plotting.build_series([str(trial)], source="tfevents")
    np.testing.assert_array_equal(s.xs, [200, 300])
    np.testing.assert_allclose(s.ys, [20.0, 30.0])


def test_cli_plot_takes_several_dirs_and_turns_errors_into_one_line(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    impact_like_trial(a / "t0")
    impact_like_trial(b / "t0")
    out = tmp_path / "out.png"
    assert cli.main(["plot", str(a), str(b), "-o", str(out), "--aggregate", "iqm"]) == 0
    assert out.exists()
    assert cli.main(["plot", str(a), "--metric", "episode_reward_mean"]) == 0  # old name, mapped
    assert cli.main(["plot", str(a), "--metric", "no/such/metric"]) == cli.USAGE_ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rllib: error: no values of 'no/such/metric'" in err
