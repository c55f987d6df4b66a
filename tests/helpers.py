"""Helpers shared by the test tiers: the repository root, the CLI in a fresh interpreter, tuned examples."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap

import pytest

from rllib_ext import experiment

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TUNED_EXAMPLES = sorted(glob.glob(os.path.join(REPO, "tuned_examples", "*", "*.yaml")))
TUNED_EXAMPLE_IDS = [os.path.relpath(p, REPO) for p in TUNED_EXAMPLES]


def run_cli_subprocess(args, timeout=120):
    """Runs `rllib ARGS` in a fresh interpreter; reports whether Ray got started."""
    code = textwrap.dedent(
        f"""
        import sys, ray
        from rllib_ext.cli import main
        rc = main({list(args)!r})
        print("RAY_STARTED=" + str(ray.is_initialized()))
        sys.exit(rc)
        """
    )
    env = dict(os.environ, RAY_AIR_NEW_OUTPUT="0")
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO
    )


_BATCH = textwrap.dedent(
    """
    import contextlib, io, json, sys, traceback
    import ray
    from rllib_ext.cli import main
    runs = []
    for args in json.loads(sys.argv[1]):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(args)
            except SystemExit as e:  # argparse
                rc = e.code if isinstance(e.code, int) else 1
            except BaseException:
                traceback.print_exc()
                rc = 1
        stdout = out.getvalue() + f"RAY_STARTED={ray.is_initialized()}\\n"
        runs.append({"rc": rc, "stdout": stdout, "stderr": err.getvalue()})
    print("CLI_BATCH=" + json.dumps(runs))
    """
)


def run_cli_batch(cases, timeout=300) -> list[subprocess.CompletedProcess]:
    """Runs `rllib ARGS` for each ARGS in ``cases``, one after the other in one fresh interpreter.

    The same checks as :func:`run_cli_subprocess` (exit status, stdout, stderr, whether Ray got
    started) at the cost of one import of Ray and torch instead of one per case: for the bad-input
    tests, which must fail before Ray starts. Each case's stdout and stderr are its own.
    """
    env = dict(os.environ, RAY_AIR_NEW_OUTPUT="0")
    proc = subprocess.run(
        [sys.executable, "-c", _BATCH, json.dumps([list(args) for args in cases])],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("CLI_BATCH=")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr
    runs = json.loads(lines[-1][len("CLI_BATCH=") :])
    return [
        subprocess.CompletedProcess(args, r["rc"], r["stdout"], r["stderr"])
        for args, r in zip(cases, runs, strict=True)
    ]


def assert_clean_error(proc, *fragments):
    """Exit 2, one ``rllib: error:`` line holding every fragment, no traceback, Ray never started."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("rllib: error:")]
    assert len(errors) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    assert "RAY_STARTED=True" not in proc.stdout


def tuned_example_threshold(exp) -> float:
    """The return a tuned example must reach: its ``pass_criteria`` or its ``stop`` value."""
    criteria = experiment.normalize_stop(exp.get("pass_criteria") or exp.get("stop") or {})
    if experiment.RETURN_KEY not in criteria:
        pytest.fail(f"tuned example has no {experiment.RETURN_KEY} in pass_criteria or stop")
    return float(criteria[experiment.RETURN_KEY])


#: Envs that need an optional extra of pyproject.toml: the extra and the modules it installs.
OPTIONAL_ENV_EXTRAS = {"rllib_ext/Atari42-v0": ("atari", ("ale_py", "cv2"))}


def skip_without_env_extra(env) -> None:
    """Skips the calling test when ``env`` needs an optional extra that is not installed.

    Validating a config builds its env on the driver, so a checkout installed without
    ``.[atari]`` cannot validate an Atari config: its tests are skipped (and say why), not failed.
    """
    extra, modules = OPTIONAL_ENV_EXTRAS.get(env, (None, ()))
    for module in modules:
        pytest.importorskip(module, reason=f"{env} needs the `{extra}` extra: pip install -e '.[{extra}]'")


def build_tuned_example(exp):
    """The algorithm class and validated config of one experiment, as `rllib train file` builds them.

    Skips the test when the experiment's env needs an optional extra that is not installed.
    """
    overrides = exp.get("config") or {}
    algo_cls = experiment.resolve_algorithm(str(exp["run"]))
    env = exp.get("env") or overrides.get("env")
    skip_without_env_extra(env)
    return algo_cls, experiment.build_config(algo_cls, env, overrides)


# ------------------------------------------------------------------------------------------------
# Settings against the Config defaults (configs/*.yaml, tuned_examples/).
# ------------------------------------------------------------------------------------------------
#: What :func:`settings_with_defaults` gives for a setting the Config class does not set itself.
NOT_A_CONFIG_DEFAULT = "<not set by the Config class>"


def same_value(a, b) -> bool:
    """Equal as settings: numbers by value (1 == 1.0), lists and tuples alike, bools only to bools."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return a == b


def _model_config_defaults(config) -> dict:
    """The model_config the default RLModule sees: RLlib's own modules (built through a Catalog)
    add ``DefaultModelConfig`` under the Config's ``model_config``; rllib_ext's modules do not."""
    import dataclasses

    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    module_class = config.get_default_rl_module_spec().module_class
    from_catalog = module_class is not None and module_class.__module__.startswith("ray.rllib.")
    return (dataclasses.asdict(DefaultModelConfig()) if from_catalog else {}) | config.model_config


def settings_with_defaults(name: str, settings: dict) -> list[tuple[str, object, object]]:
    """(key, value, default) for each setting of ``settings`` on algorithm ``name`` (no Ray).

    The default is the one of ``registry.resolve_algorithm_class(name).get_default_config()``
    (RLlib's built-ins too); ``model_config`` is compared key by key (``model_config.KEY``).
    A key the Config does not set gets :data:`NOT_A_CONFIG_DEFAULT`.
    """
    from rllib_ext import registry

    algo_cls = registry.resolve_algorithm_class(name)
    assert algo_cls is not None, f"{name!r} is not a registered or RLlib algorithm"
    config = algo_cls.get_default_config()
    out = []
    for key, value in settings.items():
        if key == "model_config" and isinstance(value, dict):
            defaults = _model_config_defaults(config)
            out += [(f"model_config.{k}", v, defaults.get(k, NOT_A_CONFIG_DEFAULT)) for k, v in value.items()]
            continue
        attr = config._translate_special_keys(key, warn_deprecated=False)
        try:
            default = getattr(config, attr, NOT_A_CONFIG_DEFAULT)
        except Exception:  # noqa: BLE001 - RLlib's deprecated properties raise from the getter
            default = NOT_A_CONFIG_DEFAULT
        out.append((key, value, default))
    return out
