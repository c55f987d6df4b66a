"""configs/*.yaml: the papers' hyperparameter tables, one algorithm per file, checked against the
Config defaults (no Ray).

A file has four top-level keys (the CLI's ``--config @FILE`` reads only ``config``)::

    usage: rllib train --algo VRACER_EXT --env Pendulum-v1 --config @configs/vracer.yaml
    paper: "003 ReF-ER, §3 and Appendix A"   # the table every value under `config` comes from
    config:                                  # the settings
      gamma: 0.995
    differs_from_default:                    # only if needed: KEY: "why this is not the default"
      replay_capacity: "paper 001 uses 2e5; TD3Config defaults to TD3's 1e6"

The rules, each failure naming the file, the key, the YAML value and the default:

* ``usage`` (a command, or a list of them) names the algorithm the table is for (``--algo``) and
  the file itself; every usage parses and validates through the CLI's own path
  (``experiment.build_config``, which starts no Ray). ``paper`` names the source. A file without these
  fails; no file is skipped. Validating builds the env, so the usage of a file whose env needs an
  optional extra (``configs/impact_atari.yaml``: ``.[atari]``) is skipped where the extra is missing.
* Every value under ``config`` equals the algorithm's Config default
  (``registry.resolve_algorithm_class(name).get_default_config()``; ``model_config`` key by key,
  as ``model_config.KEY``, with RLlib's ``DefaultModelConfig`` under it for RLlib's own modules)
  unless ``differs_from_default`` lists the key with a reason: the paper says X, the default is
  Y because ... A reason starting with ``MISMATCH`` marks a difference nobody has explained yet
  (the algorithm's owner decides which one is right). A value the Config does not set itself
  (e.g. a network size the RLModule defaults) also needs an entry, saying so.
* A key listed in ``differs_from_default`` must be under ``config`` and really differ from the
  default (a stale entry fails too).
"""

from __future__ import annotations

import glob
import os
import shlex

import pytest
import yaml

from rllib_ext import cli, experiment
from tests.helpers import NOT_A_CONFIG_DEFAULT, REPO, same_value, settings_with_defaults, skip_without_env_extra

CONFIGS = sorted(glob.glob(os.path.join(REPO, "configs", "*.yaml")))
IDS = [os.path.basename(p) for p in CONFIGS]
KEYS = {"usage", "paper", "config", "differs_from_default"}


def load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def usages(doc) -> list[str]:
    usage = doc.get("usage")
    return [usage] if isinstance(usage, str) else list(usage or [])


def algorithm_of(path) -> str:
    """The ``--algo`` of the file's first usage line."""
    argv = shlex.split(usages(load(path))[0])
    return argv[argv.index("--algo") + 1]


def test_configs_holds_tables():
    assert CONFIGS, "configs/ has no *.yaml"


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_file_names_its_usage_paper_and_config(path):
    name = os.path.basename(path)
    doc = load(path)
    assert isinstance(doc, dict), f"configs/{name}: not a mapping"
    assert set(doc) <= KEYS, (
        f"configs/{name}: unknown top-level keys {sorted(set(doc) - KEYS)} (allowed: {sorted(KEYS)})"
    )
    assert isinstance(doc.get("paper"), str) and doc["paper"].strip(), f"configs/{name}: no 'paper' naming the table"
    assert isinstance(doc.get("config"), dict) and doc["config"], f"configs/{name}: no 'config' mapping"
    lines = usages(doc)
    assert lines and all(isinstance(u, str) for u in lines), f"configs/{name}: no 'usage' command"
    algos = set()
    for usage in lines:
        argv = shlex.split(usage)
        assert argv[:2] == ["rllib", "train"] and "--algo" in argv, f"configs/{name}: usage {usage!r}"
        assert f"@configs/{name}" in argv, f"configs/{name}: usage {usage!r} does not use the file"
        algos.add(argv[argv.index("--algo") + 1])
    assert len(algos) == 1, f"configs/{name}: usages name several algorithms {sorted(algos)}"
    reasons = doc.get("differs_from_default") or {}
    assert isinstance(reasons, dict), f"configs/{name}: differs_from_default must map KEY: reason"
    for key, reason in reasons.items():
        assert isinstance(reason, str) and reason.strip(), (
            f"configs/{name}: differs_from_default[{key!r}] has no reason"
        )


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_every_value_is_the_config_default_unless_it_says_why(path):
    name = os.path.basename(path)
    doc = load(path)
    algo = algorithm_of(path)
    reasons = dict(doc.get("differs_from_default") or {})
    problems = []
    for key, value, default in settings_with_defaults(algo, doc["config"]):
        differs = default is NOT_A_CONFIG_DEFAULT or not same_value(value, default)
        listed = reasons.pop(key, None) is not None
        if differs and not listed:
            problems.append(
                f"{key}: YAML {value!r}, {algo} default {default!r}"
                " (make it the default, or say why in differs_from_default)"
            )
        elif listed and not differs:
            problems.append(f"{key}: listed in differs_from_default, but YAML {value!r} is the default {default!r}")
    problems += [f"{key}: listed in differs_from_default but not under config" for key in reasons]
    assert not problems, f"configs/{name}:\n  " + "\n  ".join(problems)


USAGES = [(path, usage) for path in CONFIGS for usage in usages(load(path))]


@pytest.mark.parametrize("path,usage", USAGES, ids=[f"{os.path.basename(p)}-{i}" for i, (p, _) in enumerate(USAGES)])
def test_usage_parses_and_validates_through_the_cli(path, usage):
    """The file's own command line, as `rllib train` parses and validates it (no Ray)."""
    argv = ["@" + os.path.join(REPO, a[1:]) if a.startswith("@") else a for a in shlex.split(usage)[1:]]
    args = cli.make_parser().parse_args(argv)
    skip_without_env_extra(args.env)  # validating builds the env: an Atari env needs the `atari` extra
    overrides = cli.parse_config_options(args.config)
    assert overrides == {**load(path)["config"], **overrides}, "the file's settings are not all passed on"
    algo_cls = experiment.resolve_algorithm(args.algo)
    config = experiment.build_config(algo_cls, args.env, overrides, num_env_runners=args.num_env_runners)
    assert config.env == args.env
