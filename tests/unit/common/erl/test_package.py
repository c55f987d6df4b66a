"""rllib_ext.common.erl, the package that replaced the module common/erl.py: old pickles still load.

A checkpoint pickles the algorithm's config, whose ``env_runner_cls`` is ERLEnvRunner; checkpoints
written before the split name it ``rllib_ext.common.erl.ERLEnvRunner`` (seen with pickletools in
``class_and_ctor_args.pkl`` of an AESRL_EXT and a CEMRL_EXT checkpoint, and in their learner
group's and env runner's). Unpickling looks a class up as ``getattr(import_module(module), name)``,
so every class the old module held must stay an attribute of the package.
"""

from __future__ import annotations

import pickle

import pytest

from rllib_ext.algorithms.aesrl.aesrl import AESRLConfig
from rllib_ext.algorithms.cemrl.cemrl import CEMRLConfig
from rllib_ext.common.erl.algorithm import ERLAlgorithm
from rllib_ext.common.erl.config import ERLConfig
from rllib_ext.common.erl.critic_worker import CriticWorker
from rllib_ext.common.erl.env_runner import ERLEnvRunner
from rllib_ext.common.erl.protocol import ERLPayload, ERLResult

OLD_MODULE = "rllib_ext.common.erl"
MOVED = {
    "ERLConfig": ERLConfig,
    "ERLPayload": ERLPayload,
    "ERLResult": ERLResult,
    "ERLEnvRunner": ERLEnvRunner,
    "CriticWorker": CriticWorker,
    "ERLAlgorithm": ERLAlgorithm,
}


def pickled_reference(module: str, name: str) -> bytes:
    """A pickle holding only a reference to ``module.name`` (the GLOBAL opcode old pickles use)."""
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n."


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_pickle_naming_the_old_module_loads_the_moved_class(name):
    assert pickle.loads(pickled_reference(OLD_MODULE, name)) is MOVED[name]


@pytest.mark.parametrize("config_cls", [AESRLConfig, CEMRLConfig])
def test_configs_pickle_their_runner_class_by_its_new_home(config_cls):
    data = pickle.dumps(config_cls().environment("Pendulum-v1"))
    assert b"rllib_ext.common.erl.env_runner" in data
    assert pickle.loads(data).env_runner_cls is ERLEnvRunner
