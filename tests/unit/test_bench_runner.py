"""``make bench`` (``python -m benchmarks NAME``) runs each script as a module from the repository root.

A script run by its path cannot import ``benchmarks.harness`` (its folder, not the root, is on the
path), so ``make bench`` failed for every script that writes rows before 2026-11-27.
"""

from __future__ import annotations

import os
import sys

from benchmarks import __main__ as bench

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_each_named_script_runs_as_a_module_from_the_repository_root(monkeypatch):
    calls = []
    monkeypatch.setattr(bench.subprocess, "call", lambda argv, cwd=None: calls.append((argv, cwd)) or 0)
    assert bench.main(["td3_steps", "erl_replay_reads"]) == 0
    assert calls == [
        ([sys.executable, "-m", "benchmarks.td3_steps"], REPO),
        ([sys.executable, "-m", "benchmarks.erl_replay_reads"], REPO),
    ]


def test_an_unknown_name_is_a_usage_error_naming_it(capsys):
    assert bench.main(["no_such_benchmark"]) == 2
    assert "no_such_benchmark" in capsys.readouterr().err
