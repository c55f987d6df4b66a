"""rllib_ext.quiet: known framework noise is hidden and counted; every other line passes."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from rllib_ext.quiet import LineFilter, Quiet, is_noise

# Lines as Ray 2.60 printed them in a plain `rllib train` on the 2-core machine (2026-11-23).
NOISE_LINES = [
    "\x1b[36m(IMPACT pid=2496)\x1b[0m DeprecationWarning: `RLModule(config=[RLModuleConfig object])` has been "
    "deprecated. Use `RLModule(observation_space=.., action_space=..)` instead.",
    "\x1b[36m(PPO pid=7360)\x1b[0m 2026-11-23 09:31:47,387\tWARNING algorithm_config.py:5160 -- You are running PPO "
    "on the new API stack! This is the new default behavior for this algorithm.",
    "\x1b[36m(PPO pid=7360)\x1b[0m [2026-11-23 09:31:47,479 E 7360 7360] core_worker.cc:2465: Actor with class name: "
    "'SingleAgentEnvRunner' and ID: '24' has constructor arguments in the object store and max_restarts > 0. If",
    "\x1b[36m(PPO pid=7360)\x1b[0m Install gputil for GPU system monitoring.",
    "2026-11-23 09:31:35,424\tWARNING authentication_token_setup.py:85 -- Token authentication is enabled for this "
    "Ray cluster. Set RAY_AUTH_MODE=disabled to opt out.",
    "\x1b[36m(IMPACT pid=10894)\x1b[0m Trainable.setup took 13.485 seconds. If your trainable is slow to initialize, "
    "consider setting reuse_actors=True to reduce actor creation overheads.",
    "\x1b[36m(IMPACT(env=CartPole-v1; env-runners=1; learners=0; multi-agent=False) pid=8134)\x1b[0m Checkpoint "
    "successfully created at: Checkpoint(filesystem=local, path=/tmp/x/checkpoint_000000)",
]

KEPT_LINES = [
    "iter    1 | env steps        850 | return     21.78 | iter   10.0 s | total    10.0 s",
    "\x1b[36m(IMPACT pid=1)\x1b[0m WARNING impact.py:12 -- env runner 2 lost; restarting (1 restart so far)",
    "DeprecationWarning: `foo` has been deprecated.",
    "rllib: warning: stop criterion 'x' is not in the results after 3 iterations",
]


@pytest.mark.parametrize("line", NOISE_LINES)
def test_known_noise_is_recognised(line):
    assert is_noise(line)


@pytest.mark.parametrize("line", KEPT_LINES)
def test_other_lines_are_not_noise(line):
    assert not is_noise(line)


def test_line_filter_drops_noise_keeps_order_and_counts():
    out, quiet = io.StringIO(), Quiet()
    stream = LineFilter(out, quiet)
    for kept, noise in zip(KEPT_LINES, NOISE_LINES[: len(KEPT_LINES)], strict=True):
        stream.write(kept + "\n")
        stream.write(noise + "\n")
    assert out.getvalue() == "".join(line + "\n" for line in KEPT_LINES)
    assert quiet.hidden == len(KEPT_LINES)


def test_line_filter_judges_a_line_written_in_pieces_as_one():
    out, quiet = io.StringIO(), Quiet()
    stream = LineFilter(out, quiet)
    noise = NOISE_LINES[3]
    stream.write(noise[:10])
    stream.write(noise[10:] + "\nkept")
    assert out.getvalue() == ""
    stream.flush()
    assert out.getvalue() == "kept" and quiet.hidden == 1


def test_install_filters_streams_and_log_handlers_and_uninstall_restores(capsys):
    handler_stream = io.StringIO()
    handler = logging.StreamHandler(handler_stream)
    logger = logging.getLogger("ray.rllib_ext_test_quiet")
    logger.addHandler(handler)
    logger.propagate = False
    saved = (sys.stdout, sys.stderr)
    quiet = Quiet().install()
    try:
        print(NOISE_LINES[0])
        print("kept on stdout")
        print(NOISE_LINES[1], file=sys.stderr)
        logger.warning(NOISE_LINES[4])
        logger.warning("a warning that matters")
    finally:
        quiet.uninstall()
        logger.removeHandler(handler)
    assert (sys.stdout, sys.stderr) == saved
    captured = capsys.readouterr()
    assert captured.out == "kept on stdout\n" and captured.err == ""
    assert handler_stream.getvalue() == "a warning that matters\n"
    assert quiet.hidden == 3
    assert not handler.filters  # uninstall removed the filter
